package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// bindWithoutPatch binds user in ns to the example hitl-answerer role less
// the verb patch on questionclaims: everything an answerer does but renew
// a claim; it returns once the API server's authorizer applies the binding.
func bindWithoutPatch(t *testing.T, k *testenv.Cluster, ns, user string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", "hitl_answerer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "hitl-answerer-without-patch"
	for i, r := range role.Rules {
		if slices.Contains(r.Resources, "questionclaims") {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "patch" })
		}
	}
	ctx := context.Background()
	if err := k.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := k.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of the role and the binding from watches.
	if err := testenv.AwaitBinding(ctx, k.Client, ns, binding.RoleRef, binding.Subjects, testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
}

// TestInboxWarnsWhenItsClaimCannotBeRenewed runs the inbox as a user who
// may claim but not renew a claim, and checks that the person is told,
// while the prompt waits, that the window is no longer held for them.
func TestInboxWarnsWhenItsClaimCannotBeRenewed(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	bindWithoutPatch(t, k, ns, "carol")
	config := kubeconfig(t, k, envtest.User{Name: "carol"})
	q := builders.Question("held", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Timeout(time.Minute).Obj()
	if err := k.Client.Create(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	// Renewals every 5/3 s instead of every 10 s.
	defer func(d time.Duration) { claimDuration = d }(claimDuration)
	claimDuration = 5 * time.Second

	in, typing := io.Pipe()
	defer typing.Close()
	var out, errOut testenv.Output
	cmd := NewCommand(genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"--kubeconfig", config, "-n", ns, "inbox", "--agent", "release-bot", "--once"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	eventually(t, 20*time.Second, func() bool { return strings.Contains(errOut.String(), "warning: ") },
		func() string { return "the inbox printed no warning:\n" + errOut.String() })
	warning := errOut.String()[strings.Index(errOut.String(), "warning: "):]
	t.Log(warning)
	for _, want := range []string{"held", "forbidden", "patch"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning does not mention %q:\n%s", want, warning)
		}
	}

	if _, err := typing.Write([]byte("1\n")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("inbox: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "Applied") {
		t.Errorf("the answer was not applied:\n%s\n%s", out.String(), errOut.String())
	}
}
