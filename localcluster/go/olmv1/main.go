// Command olmv1-tool is the part of OLM v1 the local cluster runs outside the cluster:
//
//	olmv1-tool validate [--install-namespace NS] [--watch-namespace NS] BUNDLE_DIR...
//	olmv1-tool render [--install-namespace NS] [--watch-namespace NS] BUNDLE_DIR
//	olmv1-tool helm-template --name NAME --namespace NS [--set key=value]... CHART_DIR
//
// validate loads each registry+v1 bundle directory exactly as operator-controller reads one
// unpacked from an image and renders it with the same renderer (its bundle validators, then the
// resource generators), so a bundle OLM v1 would refuse fails here first; render prints the
// objects the renderer makes (what operator-controller applies). helm-template renders a
// chart like `helm template` (install order, hooks left out), which is how cert-manager makes its
// static release manifest. The module path sits under operator-controller's so that the
// renderer, an internal package there, can be imported (the layout cert-manager's own binaries
// use).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/bundle/source"
	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/render"
	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/render/registryv1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: olmv1-tool validate|helm-template ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "validate":
		err = validate(os.Args[2:])
	case "render":
		err = renderBundle(os.Args[2:])
	case "helm-template":
		err = helmTemplate(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "olmv1-tool:", err)
		os.Exit(1)
	}
}

func validate(args []string) error {
	fs := flag.NewFlagSet("validate", flag.ExitOnError)
	installNamespace := fs.String("install-namespace", "olmv1-validate", "the ClusterExtension's spec.namespace")
	watchNamespace := fs.String("watch-namespace", "", "spec.config.inline.watchNamespace (empty: AllNamespaces)")
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		return fmt.Errorf("validate: no bundle directory given")
	}
	failed := false
	for _, dir := range fs.Args() {
		rv1, err := source.FromFS(os.DirFS(dir)).GetBundle()
		if err == nil {
			var rendered []client.Object
			rendered, err = registryv1.Renderer.Render(rv1, *installNamespace,
				render.WithTargetNamespaces(*watchNamespace))
			if err == nil {
				fmt.Printf("%s: %s valid for OLM v1 (%d objects rendered)\n", dir, rv1.CSV.Name, len(rendered))
				continue
			}
		}
		failed = true
		fmt.Printf("%s: INVALID: %v\n", dir, err)
	}
	if failed {
		return fmt.Errorf("some bundles are not valid for OLM v1")
	}
	return nil
}

func renderBundle(args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	installNamespace := fs.String("install-namespace", "olmv1-validate", "the ClusterExtension's spec.namespace")
	watchNamespace := fs.String("watch-namespace", "", "spec.config.inline.watchNamespace (empty: AllNamespaces)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("render: one bundle directory is required")
	}
	rv1, err := source.FromFS(os.DirFS(fs.Arg(0))).GetBundle()
	if err != nil {
		return err
	}
	objs, err := registryv1.Renderer.Render(rv1, *installNamespace, render.WithTargetNamespaces(*watchNamespace))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func helmTemplate(args []string) error {
	fs := flag.NewFlagSet("helm-template", flag.ExitOnError)
	name := fs.String("name", "", "release name")
	namespace := fs.String("namespace", "default", "release namespace")
	var sets setFlags
	fs.Var(&sets, "set", "key=value (repeatable), as helm --set")
	_ = fs.Parse(args)
	if fs.NArg() != 1 || *name == "" {
		return fmt.Errorf("helm-template: --name and one chart directory are required")
	}
	chart, err := loader.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	values := map[string]interface{}{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, values); err != nil {
			return err
		}
	}
	if err := chartutil.ProcessDependenciesWithMerge(chart, values); err != nil {
		return err
	}
	options := chartutil.ReleaseOptions{Name: *name, Namespace: *namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(chart, values, options, chartutil.DefaultCapabilities)
	if err != nil {
		return err
	}
	files, err := engine.Render(chart, renderValues)
	if err != nil {
		return err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, chartutil.DefaultCapabilities.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return err
	}
	if len(hooks) > 0 {
		return fmt.Errorf("helm-template: the chart renders %d hooks, which a static manifest cannot carry", len(hooks))
	}
	for _, m := range manifests {
		fmt.Printf("---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return nil
}
