//go:build tools

// Package tools pins the CNCF distribution registry (cmd/registry) the local cluster serves
// images from; built by localcluster/gotools.py.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
