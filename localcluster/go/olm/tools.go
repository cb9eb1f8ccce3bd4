//go:build tools

// Package tools pins OLM v0 (olm and catalog operators) for the OLM install tests; built by
// localcluster/gotools.py. Its CRDs are read from the same module version (localcluster/olm.py).
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)
