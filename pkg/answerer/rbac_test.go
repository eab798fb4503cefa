package answerer_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
	"github.com/hitl-dev/hitl/test/testenv"
)

// exampleRole reads the hitl-answerer ClusterRole that the repository ships
// as an example in config/rbac/examples.
func exampleRole() *rbacv1.ClusterRole {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", "hitl_answerer.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	Expect(role.Name).To(Equal("hitl-answerer"))
	return role
}

// bindRole creates role (once per suite: it is cluster-scoped) and binds it
// to user in ns, and waits until the API server's authorizer applies it.
func bindRole(ns, user string, role *rbacv1.ClusterRole) {
	GinkgoHelper()
	if err := admin.Create(ctx, role.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	Expect(admin.Create(ctx, binding)).To(Succeed())
	// The authorizer learns of the role and the binding from watches: the
	// user's first calls must not race them.
	Expect(testenv.AwaitBinding(ctx, admin, ns, binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())
}

// calls records the API calls a client makes, as "group/resource verb".
type calls struct {
	mu  sync.Mutex
	set map[string]bool
}

func (c *calls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if call := callOf(req); call != "" {
			c.mu.Lock()
			c.set[call] = true
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.set))
	for call := range c.set {
		out = append(out, call)
	}
	slices.Sort(out)
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// callOf names the RBAC verb and resource of a namespaced resource request
// (/api/v1/namespaces/NS/RES[/NAME] or /apis/G/V/namespaces/NS/RES[/NAME]);
// discovery and other requests give "".
func callOf(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces":
		parts = parts[3:]
	case len(parts) >= 6 && parts[0] == "apis" && parts[3] == "namespaces":
		group, parts = parts[1], parts[4:]
	default:
		return ""
	}
	// parts: NS RES [NAME [SUBRESOURCE]]
	resource, named := parts[1], len(parts) > 2
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return group + "/" + resource + " " + verb
}

// granted lists what a role grants on real resources as "group/resource
// verb"; the virtual resource "agents" is checked by hitl's webhook, not
// called.
func granted(role *rbacv1.ClusterRole) []string {
	var out []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if res == "agents" {
					continue
				}
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+" "+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claimReads reports whether a granted call is one the role may grant on
// claims beyond the SDK's create, patch and delete: reading them (kubectl
// get qc, a UI that shows who else holds one) and renewing by update.
func claimReads(call string) bool {
	res, verb, _ := strings.Cut(call, " ")
	return res == "hitl.dev/questionclaims" && slices.Contains([]string{"get", "list", "watch", "update"}, verb)
}

// userClient is a client that authenticates as user, with no groups beyond
// system:authenticated; rec, when given, records its calls.
func userClient(user string, rec *calls) client.WithWatch {
	GinkgoHelper()
	u, err := env.AddUser(envtest.User{Name: user}, cfg)
	Expect(err).NotTo(HaveOccurred())
	c := rest.CopyConfig(u.Config())
	if rec != nil {
		c.Wrap(rec.wrap)
	}
	cl, err := client.NewWithWatch(c, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

var _ = Describe("The example hitl-answerer role", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("lets an answerer watch, hold a claim over several renewals, reply, and withdraw a queued reply, and grants exactly the calls it makes", func() {
		role := exampleRole()
		bindRole(ns, "dana", role)
		rec := &calls{set: map[string]bool{}}
		a := answerer.New(userClient("dana", rec), ns, "dana-inbox", "release-bot")
		ch := stream(a)

		ask(where("q", ns, "release-bot").Timeout(4 * time.Second).Obj())
		until(ch, is(watch.Added, "q"))
		Eventually(state(ns, "q")).Should(Equal(hitlv1.StateOpen))
		claim, err := a.Claim(ctx, "q", 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(claim.Close)
		// Past the 4 s deadline (a window a loaded machine still makes its
		// claim in) and past one 5 s claim duration: only the renewals
		// (every 5/3 s) keep the window open.
		created := getClaim(ns, claim.Name).Spec.RenewTime.Time
		Consistently(state(ns, "q"), 8*time.Second).Should(Equal(hitlv1.StateOpen))
		c := getClaim(ns, claim.Name)
		Expect(c.Spec.RenewTime.Time).To(BeTemporally(">", created.Add(6*time.Second)), "renewed several times")
		Expect(c.Spec.Holder).To(HaveField("Username", "dana"), "the holder is who claimed, stamped by the API server")
		Expect(question(ns, "q")().Status.Claims).To(ConsistOf(hitlv1.ClaimHolder{Name: claim.Name, Holder: "dana"}))

		out, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied))
		Expect(claim.Close()).To(Succeed())
		Expect(claimed(ns, claim.Name)()).To(notFound())

		ask(where("late", ns, "release-bot").Timeout(100 * time.Millisecond).Obj())
		Eventually(state(ns, "late")).Should(Equal(hitlv1.StateContinued))
		out, err = a.Reply(ctx, "late", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeQueued))
		Expect(a.Withdraw(ctx, out.Reply)).To(Succeed())

		Expect(rec.list()).To(Equal(slices.DeleteFunc(granted(role), claimReads)),
			"the role grants what the answerer SDK calls, and nothing more but the reads and updates of claims")
	})
})
