//go:build tools

// Package tools pins openshift-preflight for its offline operator and container checks; built by localcluster/gotools.py.
package tools

import _ "github.com/redhat-openshift-ecosystem/openshift-preflight/cmd/preflight"
