package userquestion

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// A reply a GitOps engine applied carries its source into its own status
// and into the settlement it makes, inside the window or admitted late.
func TestSourceFollowsTheReply(t *testing.T) {
	fromGit := &hitlv1.ReplySource{Engine: hitlv1.EngineReference{Kind: "Kustomization", Namespace: "agents", Name: "answers"},
		Revision: "main@sha1:abc123", Verified: true}
	sources := map[string]*hitlv1.ReplySource{"r1": fromGit}
	decide := func(s *scene) (Inputs, Decision) {
		in := s.inputs()
		in.Sources = sources
		return in, Decide(in)
	}
	changeOf := func(t *testing.T, d Decision, name string) ReplyChange {
		t.Helper()
		for _, c := range d.Replies {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no change for reply %s in %+v", name, d.Replies)
		return ReplyChange{}
	}

	t.Run("inside the window", func(t *testing.T) {
		_, d := decide(given(aQuestion()).at(secs(1)).reconciled().plus(aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)))
		if d.Status.Settlement == nil || !equality.Semantic.DeepEqual(d.Status.Settlement.Source, fromGit) {
			t.Errorf("settlement = %+v, want its source %+v", d.Status.Settlement, fromGit)
		}
		if c := changeOf(t, d, "r1"); c.Outcome != hitlv1.OutcomeApplied || !equality.Semantic.DeepEqual(c.Source, fromGit) {
			t.Errorf("reply change = %+v, want Applied with source %+v", c, fromGit)
		}
	})

	t.Run("queued, then admitted", func(t *testing.T) {
		s := given(aQuestion().timeout(time.Second)).at(secs(2)).reconciled().
			plus(aReply("r1").created(secs(3)).selects("color", "red")).at(secs(3))
		in, d := decide(s)
		if d.Status.QueuedReply == nil || !equality.Semantic.DeepEqual(d.Status.QueuedReply.Source, fromGit) {
			t.Fatalf("queued reply = %+v, want its source %+v", d.Status.QueuedReply, fromGit)
		}
		s.question, s.replies = written(in, d, true)
		// The next looks read no source: the queue and the reply keep it.
		sources = nil
		in, d = decide(s.agentAdmits("r1").at(secs(5)))
		if d.Status.Settlement == nil || !d.Status.Settlement.Late || !equality.Semantic.DeepEqual(d.Status.Settlement.Source, fromGit) {
			t.Errorf("settlement = %+v, want a late one with source %+v", d.Status.Settlement, fromGit)
		}
		if c := changeOf(t, d, "r1"); c.Outcome != hitlv1.OutcomeAdmitted || c.Source != nil {
			t.Errorf("reply change = %+v, want Admitted, its source already written", c)
		}
		if got := in.Replies[0].Status.Source; !equality.Semantic.DeepEqual(got, fromGit) {
			t.Errorf("the reply's status.source = %+v, want %+v", got, fromGit)
		}
		sources = map[string]*hitlv1.ReplySource{"r1": fromGit}
	})

	t.Run("a reply from Git to a finished question is Closed, with its source", func(t *testing.T) {
		_, d := decide(given(aQuestion(), aReply("r0").created(secs(1)).selects("color", "blue")).at(secs(1)).reconciled().
			plus(aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)))
		if c := changeOf(t, d, "r1"); c.Outcome != hitlv1.OutcomeClosed || c.Reason != hitlv1.CodeNotAnswerable || !equality.Semantic.DeepEqual(c.Source, fromGit) {
			t.Errorf("reply change = %+v, want Closed NOT_ANSWERABLE with source %+v", c, fromGit)
		}
		if d.Status.Settlement.Source != nil {
			t.Errorf("the settlement by r0 took r1's source: %+v", d.Status.Settlement.Source)
		}
	})
}
