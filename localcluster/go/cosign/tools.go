//go:build tools

// Package tools pins cosign (v2: signatures in the .sig tags containers/image reads) for signing
// images and attaching SBOM attestations; built by localcluster/gotools.py.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
