package v1alpha1

import "testing"

func TestReplySourceVia(t *testing.T) {
	ks := EngineReference{Kind: "Kustomization", Namespace: "team-a", Name: "answers"}
	for _, tc := range []struct {
		src  ReplySource
		want string
	}{
		{ReplySource{Engine: ks, Revision: "main@sha1:9b1d6c0e4f3a2d8c7b6a5e4f3d2c1b0a9e8d7c6b", Verified: true},
			"via Git, commit 9b1d6c0 (verified), applied by Kustomization team-a/answers"},
		{ReplySource{Engine: ks, Revision: "main@sha1:9b1d6c0e4f3a2d8c7b6a5e4f3d2c1b0a9e8d7c6b"},
			"via Git, commit 9b1d6c0, applied by Kustomization team-a/answers"},
		{ReplySource{Engine: EngineReference{Kind: "Application", Namespace: "argocd", Name: "answers"}, Revision: "9b1d6c0e4f3a2d8c7b6a5e4f3d2c1b0a9e8d7c6b"},
			"via Git, commit 9b1d6c0, applied by Application argocd/answers"},
		{ReplySource{Engine: ks, Revision: "v1.2.3@sha256:abc"}, "via Git, commit abc, applied by Kustomization team-a/answers"},
		{ReplySource{Engine: ks}, "via Git, applied by Kustomization team-a/answers"},
	} {
		if got := tc.src.Via(); got != tc.want {
			t.Errorf("Via() = %q, want %q", got, tc.want)
		}
	}
}
