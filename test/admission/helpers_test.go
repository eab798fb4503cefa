package admission_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/test/testenv"
)

var ctx = context.Background()

// The example roles hitl ships (config/rbac/examples), and what the cases
// rely on them to grant: hitl-agent asks (and may ask as release-bot),
// hitl-answerer replies (and may answer release-bot and office-bot),
// hitl-policy-admin writes ApprovalPolicies.
const (
	agentRole       = "hitl-agent"
	answererRole    = "hitl-answerer"
	policyAdminRole = "hitl-policy-admin"
)

// cluster is a started cluster of one admission mode, with a manager.
type cluster struct {
	mode  testenv.Admission
	env   *envtest.Environment
	cfg   *rest.Config
	admin client.Client
	// stop stops the manager, then the control plane.
	stop func() error
}

// installExampleRoles creates the ClusterRoles of config/rbac/examples as
// `kubectl apply -f` would.
func (c *cluster) installExampleRoles() error {
	dir := filepath.Join(testenv.Root(), "config", "rbac", "examples")
	for _, file := range []string{"hitl_agent.yaml", "hitl_answerer.yaml", "hitl_policy_admin.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			role := &rbacv1.ClusterRole{}
			if err := d.Decode(role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if role.Kind != "ClusterRole" {
				return fmt.Errorf("%s: a %s, not a ClusterRole", file, role.Kind)
			}
			if err := c.admin.Create(ctx, role); err != nil {
				return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	return nil
}

// scene is where one case plays: its own namespace in a cluster.
type scene struct {
	*cluster
	ns string
}

// newScene makes a fresh namespace in c for a case.
func (c *cluster) newScene() *scene {
	GinkgoHelper()
	return &scene{cluster: c, ns: c.namespace()}
}

// namespace creates a namespace.
func (c *cluster) namespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "adm-"}}
	Expect(c.admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// serviceAccount creates the ServiceAccount ns/name (with annotations, when
// given) and returns a client that authenticates as it with a token from
// the TokenRequest API.
func (c *cluster) serviceAccount(ns, name string, annotations map[string]string) client.Client {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
	Expect(c.admin.Create(ctx, sa)).To(Succeed())
	token, _, err := testenv.RequestToken(ctx, c.admin, ns, name, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := testenv.TokenKubeconfig(c.cfg, name, token, "")
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cl, err := client.New(cfg, client.Options{Scheme: c.env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// user returns a client that authenticates as the user name, in groups
// (and system:authenticated), with a client certificate.
func (c *cluster) user(name string, groups ...string) client.Client {
	GinkgoHelper()
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	cl, err := client.New(u.Config(), client.Options{Scheme: c.env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

func serviceAccountSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// bind binds the ClusterRole role to subject in the scene's namespace.
func (s *scene) bind(role string, subject rbacv1.Subject) {
	GinkgoHelper()
	s.bindIn(s.ns, role, subject)
}

// bindIn binds the ClusterRole role to subject in namespace ns.
func (s *scene) bindIn(ns, role string, subject rbacv1.Subject) {
	GinkgoHelper()
	Expect(s.admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())
}

// grantAgents lets subject use verb (ask or answer) on the named agents in
// the scene's namespace, with a Role of its own.
func (s *scene) grantAgents(subject rbacv1.Subject, verb string, agents ...string) {
	GinkgoHelper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{GenerateName: verb + "-", Namespace: s.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{hitlv1.AgentsResource},
			Verbs: []string{verb}, ResourceNames: agents}},
	}
	Expect(s.admin.Create(ctx, role)).To(Succeed())
	Expect(s.admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: s.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())
}

// access is what a client may do in a namespace, as the API server's
// authorizer answers it (a SelfSubjectAccessReview, which every
// authenticated user may create).
type access struct {
	resource string // "userquestions", "questionreplies" or "agents"
	verb     string
	name     string
}

var (
	mayAsk   = access{resource: "userquestions", verb: "create"}
	mayReply = access{resource: "questionreplies", verb: "create"}
	mayAskAs = func(agent string) access {
		return access{resource: hitlv1.AgentsResource, verb: hitlv1.VerbAsk, name: agent}
	}
	mayAnswerAs = func(agent string) access {
		return access{resource: hitlv1.AgentsResource, verb: hitlv1.VerbAnswer, name: agent}
	}
)

func allowed(cl client.Client, ns string, a access) (bool, error) {
	ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: hitlv1.GroupVersion.Group, Resource: a.resource, Verb: a.verb, Name: a.name},
	}}
	if err := cl.Create(ctx, ssar); err != nil {
		return false, err
	}
	return ssar.Status.Allowed, nil
}

// awaitAllowed waits until the authorizer gives cl the accesses in the
// scene's namespace (bindings reach the authorizer through a watch).
func (s *scene) awaitAllowed(cl client.Client, accesses ...access) {
	GinkgoHelper()
	awaitAllowedIn(s.ns, cl, accesses...)
}

// awaitAllowedIn waits until the authorizer gives cl the accesses in ns.
func awaitAllowedIn(ns string, cl client.Client, accesses ...access) {
	GinkgoHelper()
	for _, a := range accesses {
		Eventually(allowed).WithArguments(cl, ns, a).Should(BeTrue(), "%s %s %s in %s", a.verb, a.resource, a.name, ns)
	}
}

// expectDenied checks that the authorizer refuses cl the accesses in the
// scene's namespace: the case's premise, so that the denial it expects is
// the rule under test and not a grant it forgot.
func (s *scene) expectDenied(cl client.Client, accesses ...access) {
	GinkgoHelper()
	for _, a := range accesses {
		Expect(allowed(cl, s.ns, a)).To(BeFalse(), "%s %s %s", a.verb, a.resource, a.name)
	}
}

// question is an ask by agent in the scene's namespace, with a generated
// name.
func (s *scene) question(agent string) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{GenerateName: agent + "-", Namespace: s.ns},
		Spec: hitlv1.UserQuestionSpec{Agent: agent, Questions: []hitlv1.Question{{ID: "env", Question: "Where to?",
			Options: []hitlv1.QuestionOption{{Label: "staging"}, {Label: "prod"}}}}},
	}
}

// reply answers question q (picking staging) in the scene's namespace,
// with a generated name and as the client sends it: no author, no labels.
func (s *scene) reply(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
	return &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{GenerateName: q.Name + "-", Namespace: s.ns},
		Spec: hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: q.Name},
			Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}},
	}
}

// labelled sets the hitl.dev/agent label of a reply, as kubectl hitl and
// the answerer SDK do.
func labelled(r *hitlv1.QuestionReply, agent string) *hitlv1.QuestionReply {
	r.Labels = map[string]string{hitlv1.AgentLabel: agent}
	return r
}

// storedQuestion reads a question as the admin.
func (s *scene) storedQuestion(name string) *hitlv1.UserQuestion {
	GinkgoHelper()
	q := &hitlv1.UserQuestion{}
	Expect(s.admin.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, q)).To(Succeed())
	return q
}

// storedReply reads a reply as the admin.
func (s *scene) storedReply(name string) *hitlv1.QuestionReply {
	GinkgoHelper()
	r := &hitlv1.QuestionReply{}
	Expect(s.admin.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, r)).To(Succeed())
	return r
}

// state is a question's state, for Eventually and Consistently.
func (s *scene) state(name string) func(Gomega) hitlv1.QuestionState {
	return func(g Gomega) hitlv1.QuestionState {
		q := &hitlv1.UserQuestion{}
		g.Expect(s.admin.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, q)).To(Succeed())
		return q.State() // as every reader takes it: not yet written is Open
	}
}

// staysOpen checks that a question is Open and stays so for a second: the
// controller may not have written its first status yet (a question it has
// not looked at is Open to SPEC, but its state is still empty), and a
// question that settled would never be Open again.
func (s *scene) staysOpen(name string) {
	GinkgoHelper()
	Eventually(s.state(name)).Should(Equal(hitlv1.StateOpen))
	Consistently(s.state(name), time.Second).Should(Equal(hitlv1.StateOpen))
}

// outcome is a reply's status once the controller gave it an outcome.
func (s *scene) outcome(name string) hitlv1.QuestionReplyStatus {
	GinkgoHelper()
	var st hitlv1.QuestionReplyStatus
	Eventually(func(g Gomega) {
		st = s.storedReply(name).Status
		g.Expect(st.Outcome).NotTo(BeEmpty())
	}).Should(Succeed(), "reply %s gets an outcome", name)
	return st
}

// expectRejected waits for the controller to reject a reply with code, and
// checks that its message starts with the code and carries fragment.
func (s *scene) expectRejected(name string, code hitlv1.ErrorCode, fragment string) {
	GinkgoHelper()
	s.expectOutcome(name, hitlv1.OutcomeRejected, code, fragment)
}

// expectClosed checks that the controller closed reply name, made when its
// question was finished or gone: Closed, NOT_ANSWERABLE, the message
// containing fragment.
func (s *scene) expectClosed(name string, fragment string) {
	GinkgoHelper()
	s.expectOutcome(name, hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable, fragment)
}

func (s *scene) expectOutcome(name string, outcome hitlv1.ReplyOutcome, code hitlv1.ErrorCode, fragment string) {
	GinkgoHelper()
	st := s.outcome(name)
	Expect(st.Outcome).To(Equal(outcome), "reply %s: %s", name, st.Message)
	Expect(st.Reason).To(Equal(code))
	Expect(st.Message).To(HavePrefix(string(code) + ": "))
	Expect(st.Message).To(ContainSubstring(fragment))
}

// statusOf is the API status of a refused request.
func statusOf(err error) metav1.Status {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the request was admitted")
	var s apierrors.APIStatus
	Expect(errors.As(err, &s)).To(BeTrue(), "not an API status: %v", err)
	return s.Status()
}

// refusedByPolicy checks that err is a denial by the validating admission
// policy named policy (as config/default prefixes it), whose message starts
// with code and names field. An RBAC denial or one by another policy fails
// it.
func refusedByPolicy(err error, policy string, code hitlv1.ErrorCode, field string, fragments ...string) {
	GinkgoHelper()
	st := statusOf(err)
	Expect(st.Message).To(ContainSubstring("ValidatingAdmissionPolicy 'hitl-%s' with binding 'hitl-%s' denied request: %s: ", policy, policy, code))
	Expect(st.Message).To(ContainSubstring(field))
	for _, f := range fragments {
		Expect(st.Message).To(ContainSubstring(f))
	}
	// The policies give their reason: Forbidden for identity, Invalid for
	// a value out of bounds.
	if code == hitlv1.CodeBadTimeout {
		Expect(st.Reason).To(Equal(metav1.StatusReasonInvalid))
	} else {
		Expect(st.Reason).To(Equal(metav1.StatusReasonForbidden))
	}
}

// refusedByWebhook checks that err is a denial by the validating reply
// webhook (the feedback webhook) whose message starts with code and carries
// the fragments.
func refusedByWebhook(err error, code hitlv1.ErrorCode, fragments ...string) {
	GinkgoHelper()
	st := statusOf(err)
	Expect(st.Message).To(ContainSubstring(`admission webhook "vquestionreply.hitl.dev" denied the request: %s: `, code))
	for _, f := range fragments {
		Expect(st.Message).To(ContainSubstring(f))
	}
	Expect(st.Reason).To(Equal(metav1.StatusReasonForbidden))
	// Clients read the code and the field from the causes.
	Expect(st.Details).NotTo(BeNil(), "the denial carries no details")
	Expect(st.Details.Causes).To(HaveLen(1))
	Expect(st.Details.Causes[0].Message).To(ContainSubstring("%s: ", code))
	Expect(st.Details.Causes[0].Field).NotTo(BeEmpty(), "the cause names no field")
	Expect(validation.CodeOf(err)).To(Equal(code))
}
