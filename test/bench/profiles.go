// Profiles: CPU and heap profiles of the manager and the API server,
// written next to the results.

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// profileCPU takes CPU profiles, of seconds from at on, of the manager (when
// it runs) and the API server, as manager-cpu-<what>.pprof and
// apiserver-cpu-<what>.pprof; the function it returns waits for them.
func (b *bench) profileCPU(ctx context.Context, at time.Time, seconds int, what string) (wait func()) {
	profile := fmt.Sprintf("profile?seconds=%d", seconds)
	done := make(chan error, 2)
	n := 1
	if b.manager != nil {
		n++
		go func() {
			time.Sleep(time.Until(at))
			done <- b.saveProfile(profile, "manager-cpu-"+what+".pprof")
		}()
	}
	go func() {
		time.Sleep(time.Until(at))
		done <- b.saveAPIServerProfile(ctx, profile, "apiserver-cpu-"+what+".pprof")
	}()
	return func() {
		for range n {
			if err := <-done; err != nil {
				fmt.Fprintf(os.Stderr, "bench: profiling %s: %v\n", what, err)
			}
		}
	}
}

// askProfile is how long the settle and baseline profiles at concurrency
// 32 last, from a second after the first ask: within the asks at either
// scale (300 asks take 4 s or more here).
func (b *bench) askProfile() int {
	if b.s.Asks < 1000 {
		return 3
	}
	return 5
}

// saveProfile writes one of the manager's pprof profiles next to the
// results, for `go tool pprof`.
func (b *bench) saveProfile(profile, file string) error {
	resp, err := http.Get("http://" + b.pprof + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	return b.saveBody(resp, file)
}

// saveAPIServerProfile writes one of kube-apiserver's pprof profiles.
func (b *bench) saveAPIServerProfile(ctx context.Context, profile, file string) error {
	resp, err := b.apiServerGet(ctx, "/debug/pprof/"+profile)
	if err != nil {
		return err
	}
	return b.saveBody(resp, file)
}

// apiServerGet reads one of kube-apiserver's own endpoints as the bench's
// administrator.
func (b *bench) apiServerGet(ctx context.Context, path string) (*http.Response, error) {
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(b.cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}

func (b *bench) saveBody(resp *http.Response, file string) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Request.URL.Path, resp.Status)
	}
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(b.outDir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
