//go:build tools

// Package tools pins grpc_health_probe, which upstream's opm image ships and OLM's catalog
// registry pods run as their probes; the local opm stand-in image gets it (localcluster/images.py).
package tools

import _ "github.com/grpc-ecosystem/grpc-health-probe"
