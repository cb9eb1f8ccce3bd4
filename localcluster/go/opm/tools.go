//go:build tools

// Package tools pins opm (operator-registry) for make catalog; built by localcluster/gotools.py.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
