package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// TestListWatch runs `kubectl hitl list --watch` against the local control
// plane: the list first, then a row for each change, in the namespace and
// for the agent asked for only.
func TestListWatch(t *testing.T) {
	k := startCluster(t)
	ns, other := newNamespace(t, k), newNamespace(t, k)
	config := adminKubeconfig(t, k)
	ctx := context.Background()
	ask := func(name, namespace, agent string) *hitlv1.UserQuestion {
		t.Helper()
		q := builders.Question(name, namespace).Agent(agent).Ask("env", "Where?", "staging", "prod").Obj()
		if err := k.Client.Create(ctx, q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	ask("before", ns, "bot")

	var out, errOut testenv.Output
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"--kubeconfig", config, "-n", ns, "list", "--watch", "--agent", "bot"})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("list --watch ended with %v\n%s", err, errOut.String())
		}
	}()

	lines := func() []string { return strings.Split(out.String(), "\n") }
	hasRow := func(name, state string) func() bool {
		return func() bool {
			for _, l := range lines() {
				if f := strings.Fields(l); len(f) > 2 && f[0] == name && f[2] == state {
					return true
				}
			}
			return false
		}
	}
	dump := func() string { return out.String() + errOut.String() }
	eventually(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "ACTIVE (1)") }, dump)
	ask("ignored", ns, "someone-else")
	ask("elsewhere", other, "bot")
	ask("after", ns, "bot")
	eventually(t, 20*time.Second, hasRow("after", "Open"), dump)

	q := &hitlv1.UserQuestion{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "after"}, q); err != nil {
		t.Fatal(err)
	}
	orig := q.DeepCopy()
	q.Spec.Cancelled = true
	if err := k.Client.Patch(ctx, q, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, hasRow("after", "Cancelled"), dump)
	for _, l := range lines() {
		if strings.HasPrefix(l, "ignored ") || strings.HasPrefix(l, "elsewhere ") {
			t.Errorf("a question the watch did not select was printed: %q", l)
		}
	}
}

// TestListWatchPrintsObjects: with -o, each change is the object in that
// format, as kubectl get --watch -o prints it.
func TestListWatchPrintsObjects(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	config := adminKubeconfig(t, k)
	var out, errOut testenv.Output
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"--kubeconfig", config, "-n", ns, "list", "-w", "-o", "name"})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("list -w -o name ended with %v\n%s", err, errOut.String())
		}
	}()
	first := builders.Question("first", ns).Agent("bot").Ask("env", "Where?", "staging", "prod").Obj()
	if err := k.Client.Create(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	// Listed or watched, first is printed; named, created after, only by the watch.
	eventually(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "userquestion.hitl.dev/first\n") },
		func() string { return out.String() + errOut.String() })
	q := builders.Question("named", ns).Agent("bot").Ask("env", "Where?", "staging", "prod").Obj()
	if err := k.Client.Create(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "userquestion.hitl.dev/named\n") },
		func() string { return out.String() + errOut.String() })
}

// TestCompletion completes question and reply names from the cluster, as
// the shell asks kubectl-hitl (`__complete`).
func TestCompletion(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	config := adminKubeconfig(t, k)
	ctx := context.Background()
	for _, name := range []string{"deploy-a", "deploy-b", "lunch"} {
		if err := k.Client.Create(ctx, builders.Question(name, ns).Agent("bot").Ask("env", "Where?", "staging", "prod").Obj()); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(args ...string) []string {
		t.Helper()
		var out, errOut testenv.Output
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append([]string{"__complete", "--kubeconfig", config, "-n", ns}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("__complete %v: %v\n%s", args, err, errOut.String())
		}
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if !strings.HasPrefix(l, ":") { // the last line is the directive
				names = append(names, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return names
	}
	if got := complete("show", "dep"); strings.Join(got, " ") != "deploy-a deploy-b" {
		t.Errorf("show dep<TAB> = %v, want deploy-a deploy-b", got)
	}
	if got := complete("answer", ""); len(got) != 3 {
		t.Errorf("answer <TAB> = %v, want the three open questions", got)
	}
	if got := complete("show", "deploy-a", ""); len(got) != 0 {
		t.Errorf("show deploy-a <TAB> = %v, want nothing: show takes one name", got)
	}
	if got := complete("withdraw", ""); len(got) != 0 {
		t.Errorf("withdraw <TAB> = %v, want nothing: no reply is queued", got)
	}
	if got := complete("list", "--state", ""); strings.Join(got, " ") != "Open Continued Settled Cancelled" {
		t.Errorf("list --state <TAB> = %v", got)
	}
}
