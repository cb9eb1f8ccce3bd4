// Command kstatus prints what sigs.k8s.io/cli-utils' kstatus (the readiness rules of Flux health
// checks, Helm 4 --wait, kpt and Config Sync) computes for Kubernetes objects; built by
// localcluster/gotools.py for the tests of our status conditions.
//
//	kstatus [FILE]    (stdin without FILE, or with "-")
//
// The input is JSON: one object, a List (its items), or several objects one after the other.
// For each object one JSON line is printed: {"kind", "name", "status", "message"}.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	in := stdin
	switch {
	case len(args) > 1:
		return errors.New("usage: kstatus [FILE]")
	case len(args) == 1 && args[0] != "-":
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	dec := json.NewDecoder(in)
	// Numbers as json.Number, converted like the API machinery does: kstatus reads
	// generation and observedGeneration as int64 and ignores them otherwise.
	dec.UseNumber()
	out := json.NewEncoder(stdout)
	for n := 0; ; n++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return errors.New("no object in the input")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("object %d: %w", n+1, err)
		}
		content, err := convert(obj)
		if err != nil {
			return fmt.Errorf("object %d: %w", n+1, err)
		}
		u := &unstructured.Unstructured{Object: content.(map[string]any)}
		items := []*unstructured.Unstructured{u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return fmt.Errorf("object %d: %w", n+1, err)
			}
			items = items[:0]
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		}
		for _, item := range items {
			res, err := status.Compute(item)
			if err != nil {
				return fmt.Errorf("%s %s: %w", item.GetKind(), item.GetName(), err)
			}
			if err := out.Encode(result{item.GetKind(), item.GetName(), string(res.Status), res.Message}); err != nil {
				return err
			}
		}
	}
}

// convert turns json.Number into int64 (or float64), the types unstructured content holds.
func convert(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			c, err := convert(x)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
		return v, nil
	case []any:
		for i, x := range v {
			c, err := convert(x)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
		return v, nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		return v.Float64()
	default:
		return v, nil
	}
}
