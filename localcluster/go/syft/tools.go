//go:build tools

// Package tools pins syft (the SBOM generator) for the per-image SBOMs; built by localcluster/gotools.py.
package tools

import _ "github.com/anchore/syft/cmd/syft"
