package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestSettledAndQueuedSayWhenTheReplyCameThroughGit(t *testing.T) {
	src := &hitlv1.ReplySource{Engine: hitlv1.EngineReference{Kind: "Kustomization", Namespace: "team-a", Name: "answers"},
		Revision: "main@sha1:9b1d6c0e4f3a2d8c7b6a5e4f3d2c1b0a9e8d7c6b"}
	by := &hitlv1.UserInfo{Username: "system:serviceaccount:team-a:answers"}
	s := &hitlv1.Settlement{Reply: "q-3f9c", AnsweredBy: by, At: metav1.NewMicroTime(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)), Source: src}
	want := "Settled in window by reply q-3f9c from system:serviceaccount:team-a:answers (via Git, commit 9b1d6c0, applied by Kustomization team-a/answers) at 2026-12-07T06:00:00Z"
	if got := settledText(s); got != want {
		t.Errorf("settledText = %q\nwant %q", got, want)
	}
	if got := queuedText(&hitlv1.QueuedReply{Name: "q-3f9c", AnsweredBy: by, Source: src}); !strings.Contains(got, "(via Git, commit 9b1d6c0, applied by Kustomization team-a/answers)") {
		t.Errorf("queuedText = %q, want the reply's source", got)
	}
	s.Source = nil
	if got := settledText(s); strings.Contains(got, "Git") {
		t.Errorf("settledText = %q for a reply sent otherwise, want no word of Git", got)
	}
}
