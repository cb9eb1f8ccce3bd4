//go:build tools

// Package tools pins OLM v1 (catalogd and operator-controller) for the OLM v1 install tests;
// built by localcluster/gotools.py. Its release manifest is read from the same module version.
package tools

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
