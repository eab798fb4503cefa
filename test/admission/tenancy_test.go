package admission_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// tenancyCases: SPEC §8 Ownership and Claims, each attack of issue 30 tried
// as the attacker would, with the shipped roles and never as the admin.
var tenancyCases = []admissionCase{
	{name: "a question records who asked, whatever the client sent", run: func(s *scene) {
		coder := s.agent("coder")
		q := s.question("coder")
		q.Spec.AskedBy = &hitlv1.UserInfo{Username: "alice"}
		Expect(coder.Create(ctx, q)).To(Succeed())
		Expect(s.storedQuestion(q.Name).Spec.AskedBy.Username).To(Equal("system:serviceaccount:" + s.ns + ":coder"))

		// It never changes: not by its own agent either.
		err := s.updateQuestion(coder, q.Name, func(q *hitlv1.UserQuestion) { q.Spec.AskedBy.Username = "alice" })
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("NOT_OWNER: spec.askedBy is stamped at admission and immutable"))
		// An update that leaves it out (a repeated apply) keeps it.
		Expect(s.updateQuestion(coder, q.Name, func(q *hitlv1.UserQuestion) { q.Spec.AskedBy = nil })).To(Succeed())
		Expect(s.storedQuestion(q.Name).Spec.AskedBy.Username).To(Equal("system:serviceaccount:" + s.ns + ":coder"))
	}},

	{name: "an agent may not cancel, admit for, relabel, hold or delete another agent's question", run: func(s *scene) {
		coder := s.agent("coder")
		builder := s.agent("builder")
		// builder may even delete questions (a namespace editor, say).
		s.grant(serviceAccountSubject(s.ns, "builder"), rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"},
			Resources: []string{"userquestions"}, Verbs: []string{"delete"}})
		Eventually(allowed).WithArguments(builder, s.ns, access{resource: "userquestions", verb: "delete"}).Should(BeTrue())

		q := s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())
		notOwner := func(err error, op string) {
			GinkgoHelper()
			refusedByPolicy(err, "question-owner", hitlv1.CodeNotOwner, "(spec.askedBy)",
				"user system:serviceaccount:"+s.ns+":builder may not "+op+" question "+q.Name,
				"asked by system:serviceaccount:"+s.ns+":coder")
		}
		notOwner(s.updateQuestion(builder, q.Name, func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true }), "change")
		notOwner(s.updateQuestion(builder, q.Name, func(q *hitlv1.UserQuestion) { q.Labels["team"] = "builder" }), "change")
		notOwner(s.updateQuestion(builder, q.Name, func(q *hitlv1.UserQuestion) {
			q.Finalizers = append(q.Finalizers, "builder.example/hold")
		}), "change")
		notOwner(s.updateQuestion(builder, q.Name, func(q *hitlv1.UserQuestion) {
			q.Annotations = map[string]string{"note": "mine"}
		}), "change")
		notOwner(builder.Delete(ctx, s.storedQuestion(q.Name)), "delete")

		stored := s.storedQuestion(q.Name)
		Expect(stored.Spec.Cancelled).To(BeFalse())
		Expect(stored.Finalizers).To(BeEmpty())
		Expect(stored.Labels).NotTo(HaveKey("team"))

		// Its own agent may.
		Expect(s.updateQuestion(coder, q.Name, func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true })).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateCancelled))
	}},

	{name: "nobody withdraws another person's reply", run: func(s *scene) {
		coder := s.agent("coder")
		alice, bob := s.answerer("alice", "coder"), s.answerer("bob", "coder")
		q := s.timedQuestion("coder", time.Second)
		Expect(coder.Create(ctx, q)).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateContinued))
		r := labelled(s.reply(q), "coder")
		Expect(alice.Create(ctx, r)).To(Succeed())
		Expect(s.outcome(r.Name).Outcome).To(Equal(hitlv1.OutcomeQueued))

		refusedByPolicy(bob.Delete(ctx, s.storedReply(r.Name)), "reply-owner", hitlv1.CodeNotOwner, "(spec.answeredBy)",
			"user bob may not withdraw reply "+r.Name, "sent by alice")
		Expect(s.storedQuestion(q.Name).Status.QueuedReply.Name).To(Equal(r.Name))
		// Nor does another agent admit it for coder.
		builder := s.agent("builder")
		refusedByPolicy(s.updateQuestion(builder, q.Name, func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = r.Name }),
			"question-owner", hitlv1.CodeNotOwner, "(spec.askedBy)", "user system:serviceaccount:"+s.ns+":builder may not change question "+q.Name)

		// Its author may.
		Expect(alice.Delete(ctx, s.storedReply(r.Name))).To(Succeed())
		Eventually(func() *hitlv1.QueuedReply { return s.storedQuestion(q.Name).Status.QueuedReply }).Should(BeNil())
	}},

	{name: "a reply re-created under a settling reply's name is judged afresh", run: func(s *scene) {
		coder := s.agent("coder")
		alice := s.answerer("alice", "coder")
		// eve may reply, but not answer coder.
		eve := s.user("eve")
		s.bind(answererRole, userSubject("eve"))
		s.awaitAllowed(eve, mayReply)
		s.expectDenied(eve, mayAnswerAs("coder"))

		q := s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())
		r := labelled(s.reply(q), "coder")
		r.GenerateName, r.Name = "", q.Name+"-answer"
		Expect(alice.Create(ctx, r)).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
		settled := s.storedQuestion(q.Name).Status
		Expect(settled.Settlement.ReplyUID).To(Equal(s.storedReply(r.Name).UID))
		Expect(alice.Delete(ctx, s.storedReply(r.Name))).To(Succeed())
		Eventually(func() error { return s.admin.Get(ctx, client.ObjectKeyFromObject(r), &hitlv1.QuestionReply{}) }).ShouldNot(Succeed())

		again := s.reply(q)
		again.GenerateName, again.Name = "", r.Name
		again.Spec.Answers = []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}
		if err := eve.Create(ctx, again); err == nil {
			// Admitted (no agent label to check at admission): the
			// controller judges it as the new reply it is.
			s.expectRejected(again.Name, hitlv1.CodeForbidden, `user "eve" may not answer the questions of agent "coder"`)
		} else {
			Expect(statusOf(err).Message).To(ContainSubstring("FORBIDDEN: "))
		}
		Expect(s.storedQuestion(q.Name).Status.Answers).To(Equal(settled.Answers))
	}},

	{name: "a reply for another question of the same name settles nothing", run: func(s *scene) {
		coder := s.agent("coder")
		alice := s.answerer("alice", "coder")
		q := s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())

		r := labelled(s.reply(q), "coder")
		r.Spec.QuestionRef.UID = "5b2b6c70-0000-4000-8000-000000000000"
		if err := alice.Create(ctx, r); feedback(s) {
			refusedByWebhook(err, hitlv1.CodeNotAnswerable, "not the live question's")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectClosed(r.Name, "(spec.questionRef.uid)")
		}
		s.staysOpen(q.Name)

		// Made before its question was asked: it answers an older one.
		early := labelled(s.reply(&hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: "later"}}), "coder")
		if err := alice.Create(ctx, early); feedback(s) {
			refusedByWebhook(err, hitlv1.CodeNotAnswerable, "question later does not exist")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectClosed(early.Name, "does not exist")
		}
		time.Sleep(time.Second) // creation times are whole seconds
		later := s.question("coder")
		later.GenerateName, later.Name = "", "later"
		Expect(coder.Create(ctx, later)).To(Succeed())
		s.staysOpen(later.Name)

		// With the live question's UID, it settles.
		good := labelled(s.reply(q), "coder")
		good.Spec.QuestionRef.UID = s.storedQuestion(q.Name).UID
		Expect(alice.Create(ctx, good)).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
	}},

	{name: "the identity that asked never approves its own Approval question", run: func(s *scene) {
		coder := s.agent("coder")
		// A grant bound by mistake: coder may answer itself.
		s.grantAgents(serviceAccountSubject(s.ns, "coder"), hitlv1.VerbAnswer, "coder")
		s.grant(serviceAccountSubject(s.ns, "coder"), rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"},
			Resources: []string{"questionreplies"}, Verbs: []string{"create", "get"}})
		s.awaitAllowed(coder, mayReply, mayAnswerAs("coder"))

		q := approvalQuestion(s, "coder")
		Expect(coder.Create(ctx, q)).To(Succeed())
		r := labelled(s.reply(q), "coder")
		r.Spec.Answers = []hitlv1.AnswerItem{{ID: "perm", Selected: []string{"Allow"}}}
		if err := coder.Create(ctx, r); feedback(s) {
			refusedByWebhook(err, hitlv1.CodeSelfApproval, "may not answer its own Approval or PlanReview question")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectRejected(r.Name, hitlv1.CodeSelfApproval, "(spec.askedBy)")
		}
		s.staysOpen(q.Name)

		// Someone else may.
		alice := s.answerer("alice", "coder")
		other := labelled(s.reply(q), "coder")
		other.Spec.Answers = r.Spec.Answers
		Expect(alice.Create(ctx, other)).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
	}},

	{name: "only those who may answer an agent claim its questions, and only the holder renews or releases", run: func(s *scene) {
		coder := s.agent("coder")
		alice, bob := s.answerer("alice", "coder"), s.answerer("bob", "coder")
		// mallory answers office-bot only (hitl-answerer's example grant).
		mallory := s.user("mallory")
		s.bind(answererRole, userSubject("mallory"))
		s.awaitAllowed(mallory, access{resource: "questionclaims", verb: "create"}, mayAnswerAs("office-bot"))
		s.expectDenied(mallory, mayAnswerAs("coder"))

		q := s.timedQuestion("coder", 3*time.Second)
		Expect(coder.Create(ctx, q)).To(Succeed())

		refusedByPolicy(mallory.Create(ctx, claim(s, q.Name, "coder")), "claim-identity", hitlv1.CodeForbidden, "(spec.agent)",
			"user mallory may not claim the questions of agent coder")
		// Naming an agent it may answer: admitted, and holds nothing.
		decoy := claim(s, q.Name, "office-bot")
		Expect(mallory.Create(ctx, decoy)).To(Succeed())
		Eventually(s.state(q.Name), 10*time.Second).Should(Equal(hitlv1.StateContinued))
		Expect(s.storedQuestion(q.Name).Status.ClaimCount).To(BeZero())

		// alice's claim is stamped with alice, whatever she sent.
		q2 := s.timedQuestion("coder", 2*time.Second)
		Expect(coder.Create(ctx, q2)).To(Succeed())
		c := claim(s, q2.Name, "coder")
		c.Spec.Holder = &hitlv1.UserInfo{Username: "bob"}
		Expect(alice.Create(ctx, c)).To(Succeed())
		stored := &hitlv1.QuestionClaim{}
		Expect(s.admin.Get(ctx, client.ObjectKeyFromObject(c), stored)).To(Succeed())
		Expect(stored.Spec.Holder.Username).To(Equal("alice"))
		Expect(stored.Labels).To(HaveKeyWithValue(hitlv1.QuestionLabel, q2.Name))
		Eventually(func() []hitlv1.ClaimHolder { return s.storedQuestion(q2.Name).Status.Claims }).Should(
			ConsistOf(hitlv1.ClaimHolder{Name: c.Name, Holder: "alice"}))

		// bob may neither renew nor release it.
		renew := stored.DeepCopy()
		renew.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		refusedByPolicy(bob.Patch(ctx, renew, client.MergeFrom(stored)), "claim-identity", hitlv1.CodeNotOwner, "(spec.holder)",
			"user bob may not renew claim "+c.Name, "held by alice")
		refusedByPolicy(bob.Delete(ctx, stored), "claim-owner", hitlv1.CodeNotOwner, "(spec.holder)",
			"user bob may not release claim "+c.Name)
		// It holds the window past the deadline, until alice releases it.
		Consistently(s.state(q2.Name), 3*time.Second).Should(Equal(hitlv1.StateOpen))
		Expect(alice.Delete(ctx, stored)).To(Succeed())
		Eventually(s.state(q2.Name), 10*time.Second).Should(Equal(hitlv1.StateContinued))
	}},

	{name: "a claim's holder is its UID too: a re-created ServiceAccount of the same name is someone else", run: func(s *scene) {
		coder := s.agent("coder")
		subject := serviceAccountSubject(s.ns, "watcher")
		s.bind(answererRole, subject)
		s.grantAgents(subject, hitlv1.VerbAnswer, "coder")
		watcher := s.serviceAccount(s.ns, "watcher", nil)
		s.awaitAllowed(watcher, mayAnswerAs("coder"))

		q := s.timedQuestion("coder", 2*time.Second)
		Expect(coder.Create(ctx, q)).To(Succeed())
		c := claim(s, q.Name, "coder")
		Expect(watcher.Create(ctx, c)).To(Succeed())
		stored := &hitlv1.QuestionClaim{}
		Expect(s.admin.Get(ctx, client.ObjectKeyFromObject(c), stored)).To(Succeed())
		Expect(stored.Spec.Holder.UID).NotTo(BeEmpty())

		// The ServiceAccount is deleted and one of the same name made: same
		// username, another UID, the same grants by name.
		Expect(s.admin.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "watcher"}})).To(Succeed())
		Eventually(func() error {
			return s.admin.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "watcher"}, &corev1.ServiceAccount{})
		}).Should(Satisfy(apierrors.IsNotFound))
		impostor := s.serviceAccount(s.ns, "watcher", nil)
		s.awaitAllowed(impostor, mayAnswerAs("coder"))

		username := "system:serviceaccount:" + s.ns + ":watcher"
		renew := stored.DeepCopy()
		renew.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		refusedByPolicy(impostor.Patch(ctx, renew, client.MergeFrom(stored)), "claim-identity", hitlv1.CodeNotOwner, "(spec.holder)",
			"user "+username+" may not renew claim "+c.Name)
		refusedByPolicy(impostor.Delete(ctx, stored), "claim-owner", hitlv1.CodeNotOwner, "(spec.holder)",
			"user "+username+" may not release claim "+c.Name)
		// The claim still holds the window past its deadline.
		Consistently(s.state(q.Name), 3*time.Second).Should(Equal(hitlv1.StateOpen))
	}},

	{name: "the answerer role reaches no Lease", run: func(s *scene) {
		alice := s.answerer("alice", "coder")
		for _, verb := range []string{"create", "update", "patch", "delete", "get", "list"} {
			ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: s.ns, Group: "coordination.k8s.io", Resource: "leases", Verb: verb},
			}}
			Expect(alice.Create(ctx, ssar)).To(Succeed())
			Expect(ssar.Status.Allowed).To(BeFalse(), "alice may %s leases", verb)
		}
	}},

	{name: "a namespace bounds its claims with a ResourceQuota", run: func(s *scene) {
		coder := s.agent("coder")
		alice := s.answerer("alice", "coder")
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: s.ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/questionclaims.hitl.dev": resource.MustParse("2")}},
		}
		Expect(s.admin.Create(ctx, quota)).To(Succeed())
		// What kube-controller-manager's quota controller writes first
		// (this control plane runs none); the API server's quota admission
		// counts from there.
		quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard,
			Used: corev1.ResourceList{"count/questionclaims.hitl.dev": resource.MustParse("0")}}
		Expect(s.admin.Status().Update(ctx, quota)).To(Succeed())
		q := s.timedQuestion("coder", time.Minute)
		Expect(coder.Create(ctx, q)).To(Succeed())
		Expect(alice.Create(ctx, claim(s, q.Name, "coder"))).To(Succeed())
		Expect(alice.Create(ctx, claim(s, q.Name, "coder"))).To(Succeed())
		err := alice.Create(ctx, claim(s, q.Name, "coder"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("exceeded quota"))
	}},

	{name: "question text is bounded", run: func(s *scene) {
		coder := s.agent("coder")
		q := approvalQuestion(s, "coder")
		q.Spec.Questions[0].Intent.Approval.Display = &hitlv1.ApprovalDisplay{
			Question: hitlv1.LocalizedText{"en": "May I?"},
			Detail:   hitlv1.LocalizedText{"en": strings.Repeat("x", 1100*1024)},
		}
		err := coder.Create(ctx, q)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("BAD_INTENT: a localized text is at most 4096 characters"))

		q = s.question("coder")
		q.Spec.Questions = nil
		for i := range 3 {
			q.Spec.Questions = append(q.Spec.Questions, hitlv1.Question{ID: "q" + string(rune('a'+i)), Question: "Why?",
				Detail: strings.Repeat("y", 30000)})
		}
		err = coder.Create(ctx, q)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("BAD_INTENT: the questions' text"))
		q.Spec.Questions = q.Spec.Questions[:2]
		Expect(coder.Create(ctx, q)).To(Succeed())

		// Options too: 3 questions of 32 options with 900-character
		// descriptions are 86,400 characters, above the 65,536 of all
		// options together; two such questions are not.
		q = s.question("coder")
		q.Spec.Questions = nil
		for i := range 3 {
			opts := make([]hitlv1.QuestionOption, 32)
			for j := range opts {
				opts[j] = hitlv1.QuestionOption{Label: fmt.Sprintf("option %d", j), Description: strings.Repeat("z", 900)}
			}
			q.Spec.Questions = append(q.Spec.Questions, hitlv1.Question{ID: "o" + string(rune('a'+i)), Question: "Which?", Options: opts})
		}
		err = coder.Create(ctx, q)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("BAD_INTENT: the options' text (label and description, all questions together) is at most 65536 characters"))
		Expect(err.Error()).To(ContainSubstring("spec.questions"))
		q.Spec.Questions = q.Spec.Questions[:2]
		Expect(coder.Create(ctx, q)).To(Succeed())
	}},
}

// agent makes the ServiceAccount name, bound to the agent role, which asks
// as the agent of its name.
func (s *scene) agent(name string) client.Client {
	GinkgoHelper()
	cl := s.serviceAccount(s.ns, name, nil)
	s.bind(agentRole, serviceAccountSubject(s.ns, name))
	s.awaitAllowed(cl, mayAsk)
	return cl
}

// answerer makes the user name, bound to the answerer role, who may also
// answer the agents given.
func (s *scene) answerer(name string, agents ...string) client.Client {
	GinkgoHelper()
	cl := s.user(name)
	s.bind(answererRole, userSubject(name))
	s.grantAgents(userSubject(name), hitlv1.VerbAnswer, agents...)
	s.awaitAllowed(cl, mayReply)
	for _, a := range agents {
		s.awaitAllowed(cl, mayAnswerAs(a))
	}
	return cl
}

// grant gives subject one more rule in the scene's namespace.
func (s *scene) grant(subject rbacv1.Subject, rule rbacv1.PolicyRule) {
	GinkgoHelper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: "extra-", Namespace: s.ns}, Rules: []rbacv1.PolicyRule{rule}}
	Expect(s.admin.Create(ctx, role)).To(Succeed())
	Expect(s.admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: s.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())
}

// updateQuestion changes a question as cl, read afresh and retried on a
// conflict (the controller writes its status meanwhile).
func (s *scene) updateQuestion(cl client.Client, name string, change func(*hitlv1.UserQuestion)) error {
	var err error
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := s.storedQuestion(name)
		if fresh.Labels == nil {
			fresh.Labels = map[string]string{}
		}
		change(fresh)
		err = cl.Update(ctx, fresh)
		return err
	})
	return err
}

// timedQuestion is a question with a window of timeout.
func (s *scene) timedQuestion(agent string, timeout time.Duration) *hitlv1.UserQuestion {
	q := s.question(agent)
	q.Spec.Timeout = &metav1.Duration{Duration: timeout}
	return q
}

// approvalQuestion is an Approval ask by agent.
func approvalQuestion(s *scene, agent string) *hitlv1.UserQuestion {
	q := s.question(agent)
	q.Spec.Questions = []hitlv1.Question{{ID: "perm", Question: "May I deploy?",
		Options: []hitlv1.QuestionOption{{Label: "Allow"}, {Label: "Deny"}},
		Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval,
			Approval: &hitlv1.ApprovalIntent{Approve: "Allow", Reject: "Deny"}}}}
	return q
}

// claim is a claim on question, naming agent, as a client sends it.
func claim(s *scene, question, agent string) *hitlv1.QuestionClaim {
	return &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: question + "-claim-", Namespace: s.ns},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: question}, Agent: agent,
			DurationSeconds: 30, RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}
}
