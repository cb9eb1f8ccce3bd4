// Command flipfloor is the Go floor of tools/bench/tdset_boundary.py (--floor go): the best a Go
// controller could do at a TDSet boundary. At one instant it PATCHes /scale of every Deployment
// named in a JSON file, all at once, through client-go with no client-side rate limit (QPS -1)
// over HTTP/2, and prints one JSON line with how long that took. Built by the bench into its
// cache directory; not part of the operators or of the tests.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the client")
	namespace := flag.String("namespace", "", "namespace of the Deployments")
	targets := flag.String("targets", "", "JSON file: Deployment name -> UID (the write's precondition)")
	replicas := flag.Int("replicas", 1, "spec.replicas to write")
	at := flag.Float64("at", 0, "Unix time (seconds) to send the writes at; 0: now")
	concurrency := flag.Int("concurrency", 0, "writes in flight at most; 0: all at once")
	flag.Parse()

	raw, err := os.ReadFile(*targets)
	if err != nil {
		fail(err)
	}
	uids := map[string]string{}
	if err := json.Unmarshal(raw, &uids); err != nil {
		fail(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	cfg.QPS = -1 // no client-side rate limit (controller-runtime's default since 0.21)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	deployments := client.AppsV1().Deployments(*namespace)
	ctx := context.Background()
	// One request first, so the connection (TLS, HTTP/2) is up before the instant, as a running
	// controller's is.
	if _, err := deployments.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		fail(err)
	}
	if *at > 0 {
		time.Sleep(time.Until(time.Unix(0, int64(*at*1e9))))
	}
	start := time.Now()
	latencies := make([]float64, 0, len(uids))
	errs := 0
	firstErr := ""
	var mu sync.Mutex
	var wg sync.WaitGroup
	limit := *concurrency
	if limit <= 0 {
		limit = len(uids)
	}
	// Beyond what the API server's priority and fairness admits for one user (its seats and
	// queues), writes come back 429 and client-go retries them after Retry-After.
	slots := make(chan struct{}, limit)
	for name, uid := range uids {
		wg.Add(1)
		go func(name, uid string) {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			body := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"replicas":%d}}`, uid, *replicas)
			t0 := time.Now()
			_, err := deployments.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "scale")
			took := time.Since(t0).Seconds()
			mu.Lock()
			defer mu.Unlock()
			latencies = append(latencies, took)
			if err != nil {
				errs++
				if firstErr == "" {
					firstErr = err.Error()
				}
			}
		}(name, uid)
	}
	wg.Wait()
	sort.Float64s(latencies)
	out := map[string]any{
		"client":       fmt.Sprintf("go (client-go, HTTP/2, %d in flight at most)", limit),
		"sent":         len(uids),
		"errors":       errs,
		"first_error":  firstErr,
		"late_start_s": start.Sub(time.Unix(0, int64(*at*1e9))).Seconds(),
		"took_s":       time.Since(start).Seconds(),
		"latency_p50":  pick(latencies, 50),
		"latency_p99":  pick(latencies, 99),
	}
	if *at == 0 {
		out["late_start_s"] = 0.0
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

// pick is the p-th percentile by the nearest-rank method (tools.bench.lib.percentile).
func pick(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "flipfloor:", err)
	os.Exit(1)
}
