// Command imagecopy copies one image with containers/image, under a signature policy: the pull
// path of skopeo, podman, CRI-O and OLM v1's catalogd and operator-controller. Debian's skopeo
// is built without sigstore support, so the pull-time verification tests use this instead.
//
//	imagecopy --policy policy.json --registries.d DIR [--cert-dir DIR] docker://REF oci:DIR:TAG
//
// It exits 1 with containers/image's own error ("Source image rejected: ...") when the policy
// refuses the image.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"strings"

	"go.podman.io/image/v5/copy"
	_ "go.podman.io/image/v5/docker"     // docker:// (the registry)
	_ "go.podman.io/image/v5/oci/layout" // oci: (where the copy goes)
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/transports"
	"go.podman.io/image/v5/types"
)

func main() {
	policyPath := flag.String("policy", "", "signature policy (policy.json)")
	registriesD := flag.String("registries.d", "", "registries.d directory (use-sigstore-attachments)")
	certDir := flag.String("cert-dir", "", "directory with the registry's CA certificate (ca.crt)")
	flag.Parse()
	if flag.NArg() != 2 || *policyPath == "" {
		fmt.Fprintln(os.Stderr, "usage: imagecopy --policy FILE [--registries.d DIR] [--cert-dir DIR] SRC DEST")
		os.Exit(2)
	}
	if err := run(*policyPath, *registriesD, *certDir, flag.Arg(0), flag.Arg(1)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(policyPath, registriesD, certDir, src, dest string) error {
	policy, err := signature.NewPolicyFromFile(policyPath)
	if err != nil {
		return err
	}
	pc, err := signature.NewPolicyContext(policy)
	if err != nil {
		return err
	}
	defer func() { _ = pc.Destroy() }()
	srcRef, err := parse(src)
	if err != nil {
		return err
	}
	destRef, err := parse(dest)
	if err != nil {
		return err
	}
	sys := &types.SystemContext{RegistriesDirPath: registriesD, DockerCertPath: certDir}
	_, err = copy.Image(context.Background(), pc, destRef, srcRef, &copy.Options{
		SourceCtx:      sys,
		DestinationCtx: &types.SystemContext{},
		// The signatures are checked on the way in; an OCI layout cannot store them (catalogd
		// drops them the same way).
		RemoveSignatures: true,
	})
	return err
}

// parse reads TRANSPORT:REFERENCE with only the transports linked in (no containers-storage).
func parse(name string) (types.ImageReference, error) {
	transport, rest, ok := strings.Cut(name, ":")
	if !ok || transports.Get(transport) == nil {
		return nil, fmt.Errorf("unknown transport in %q (docker:// or oci:)", name)
	}
	return transports.Get(transport).ParseReference(rest)
}
