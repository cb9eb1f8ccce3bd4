//go:build tools

// Package tools pins operator-sdk for make validate; built by localcluster/gotools.py.
//
// v1.33.0: newer tags tried here (v1.42.0) are served by the module proxy but have no entry in
// the checksum database reachable from our machines, and neither do a few of v1.33.0's own
// dependencies (sigs.k8s.io/kubebuilder/v3 v3.11.1, its k8s.io/kube-openapi pin). go.sum was
// therefore recorded once with GOSUMDB=off; every build verifies against it. golang.org/x/tools
// is raised to v0.31.0 because the v0.13.0 that v1.33.0 pins does not compile with Go >= 1.24.
package tools

import _ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
