package testenv

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hitl-dev/hitl/internal/manager"
)

// Shared is a Cluster (the default install's admission and a manager with
// the default configuration) that the plain Go tests of one package share:
// started by the first test that needs it, stopped by the package's
// TestMain with Stop. The controller's logs are discarded.
type Shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Get returns the shared cluster, starting it on first use; it fails t when
// the cluster could not start.
func (s *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() {
		logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
		s.cluster, s.err = StartCluster(manager.DefaultConfig(), Options{})
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.cluster
}

// Stop stops the cluster if it was started.
func (s *Shared) Stop() {
	if s.cluster == nil {
		return
	}
	if err := s.cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
	}
}
