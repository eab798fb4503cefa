// Package gitops runs a real Flux against the local control plane with
// hitl installed as it ships: source-controller and kustomize-controller
// (built by hack/flux-assets.sh) as processes, each as its ServiceAccount;
// a Git server on a loopback port (git http-backend); hitl's CRDs,
// admission policies and the manager's RBAC as config/default installs
// them, the roles of config/rbac/examples, and the manager binary of this
// tree running as its ServiceAccount. Agents ask as their ServiceAccounts
// (hitl-agent), alice answers with kubectl hitl (hitl-answerer), and
// tenants answer by commit: each tenant's Kustomization applies the reply
// files pushed to its repository as the tenant's ServiceAccount, bound to
// hitl-gitops-answerer. Only Flux's controllers (cluster-admin, as Flux's
// install binds kustomize-controller), the set-up and the assertions act
// as admin; the tenant of the ConfigMap scenario is admin of its own
// namespace only, as Flux's multi-tenancy guide sets one up. Run it with `make test-gitops`, which builds Flux first; without
// the binaries the test skips, so that `go test ./...` passes.
package gitops

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hitl-dev/hitl/test/testenv"
)

// world is what the scenarios share: the control plane, Flux, hitl, the
// Git server and the agents' namespace.
type world struct {
	env    *envtest.Environment
	cfg    *rest.Config
	admin  client.Client
	git    *gitServer
	gitEnv []string
	// bin holds the manager and kubectl-hitl built from this tree.
	bin string
	// alice is alice's kubeconfig.
	alice string
}

func TestGitOps(t *testing.T) {
	ctx, w := startWorld(t)

	// Each scenario has its own tenant (namespace, repository,
	// Kustomization) and its own questions: they run in parallel.
	for _, s := range []struct {
		name string
		run  func(context.Context, *testing.T, *world)
	}{
		{"Flux applies and prunes pushed commits", testAppliesAndPrunes},
		{"answer by commit", testAnswerByCommit},
		{"another tenant cannot answer an agent it has no grant for", testAnotherTenantRefused},
		{"TTL cleanup with the file still in Git", testTTLWithFileInGit},
		{"re-applied unchanged is a no-op and prune after settlement undoes nothing", testReapplyAndPrune},
		{"a force-push removes the reply before it is applied", testForcePushBeforeApply},
		{"a reply the controller rejects turns the engine red", testRejectedReplyTurnsTheEngineRed},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(ctx, t, w)
		})
	}
}

// startWorld starts the control plane, Flux, the Git server and hitl, and
// sets the agents' namespace up; it skips t when Flux's binaries or git are
// missing. The context ends with t, or after 15 minutes.
func startWorld(t *testing.T) (context.Context, *world) {
	t.Helper()
	flux := fluxAssets(testenv.Root())
	for _, b := range []string{"source-controller", "kustomize-controller"} {
		if _, err := os.Stat(filepath.Join(flux, b)); err != nil {
			t.Skipf("no Flux: %v (run `make test-gitops`, which builds it with hack/flux-assets.sh)", err)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v (apt-get install git)", err)
	}
	// The clients' own logs (controller-runtime's) are not wanted here.
	logf.SetLogger(logr.Discard())
	// t.Context ends when the parallel scenarios have all finished.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	built := buildHitl(t)
	w := &world{gitEnv: gitEnv(t)}
	w.git = startGitServer(t, w.gitEnv)
	w.env, w.cfg, w.admin = startFlux(ctx, t, flux)
	w.bin = built()
	installHitl(ctx, t, w)
	setUpAgents(ctx, t, w, t.TempDir())
	t.Logf("control plane, Flux and hitl up in %s", time.Since(start).Round(time.Millisecond))
	return ctx, w
}

// startFlux starts the control plane with the CRDs of flux/crds and runs
// source-controller and kustomize-controller against it, each as its
// ServiceAccount. kustomize-controller fetches artifacts from
// source-controller's artifact server on a loopback port.
func startFlux(ctx context.Context, t *testing.T, flux string) (*envtest.Environment, *rest.Config, client.Client) {
	t.Helper()
	env, cfg, c := startControlPlane(t, filepath.Join(flux, "crds"))
	apply(ctx, t, c, controllerIdentities)
	dir := t.TempDir()
	storage := freePort(t)
	startController(t, flux, "source-controller", serviceAccountKubeconfig(ctx, t, cfg, c, dir, fluxNamespace, "source-controller"),
		"--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage)
	startController(t, flux, "kustomize-controller", serviceAccountKubeconfig(ctx, t, cfg, c, dir, fluxNamespace, "kustomize-controller"))
	return env, cfg, c
}
