package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hitl-dev/hitl/test/testenv"
)

var _ = Describe("A sensitive answer", func() {
	It("reaches the asking agent and nobody else: never in the clear in etcd, a reply, a status, an Event or a log, and no other ServiceAccount reads it", func() {
		ns, bot := newNamespace()
		secret := "tok-" + randomHex(16)
		marker := "Which deploy token? " + randomHex(8)

		_, waitAsk := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", agentName, "--name", "token",
			"--sensitive", "--question", marker)
		Eventually(jsonpath(ns, "uq/token", "{.status.state}")).Should(Equal("Open"))
		Expect(jsonpath(ns, "uq/token", "{.spec.sealingKey}")()).To(HaveLen(87), "the agent asks with its public key")

		// The answerer cannot give the value as an argument, and gives it on
		// stdin: the CLI seals it for the agent before anything is sent.
		refused := alice.hitl("-n", ns, "answer", "token", "--custom", "q="+secret)
		Expect(refused.code).NotTo(BeZero())
		Expect(refused.stderr).To(ContainSubstring("BAD_ANSWER: question q: the question is sensitive"))
		answered := alice.exe(secret+"\n", "kubectl", "hitl", "-n", ns, "answer", "token", "--sensitive-from-file", "q=-")
		Expect(answered.code).To(BeZero(), answered.stderr)
		Expect(answered.stdout + answered.stderr).NotTo(ContainSubstring(secret))

		asked := waitAsk()
		Expect(asked.code).To(BeZero(), asked.stderr)
		Expect(decode(asked.stdout)).To(HaveKeyWithValue("Sensitive", HaveKeyWithValue("q", secret)), "the agent opens the answer")

		// What the API holds is only the sealed text.
		for _, resource := range []string{"uq/token", "qr"} {
			out := admin.kubectl("-n", ns, "get", resource, "-o", "json")
			Expect(out.code).To(BeZero(), out.stderr)
			Expect(out.stdout).To(ContainSubstring(`"sealed"`), resource)
			Expect(out.stdout).NotTo(ContainSubstring(secret), resource)
		}
		Expect(jsonpath(ns, "uq/token", "{.status.answers[0].custom}")()).To(BeEmpty())
		events := admin.kubectl("get", "events", "-A", "-o", "json")
		Expect(events.code).To(BeZero(), events.stderr)
		Expect(events.stdout).To(ContainSubstring("token"), "the question's Events are there")
		Expect(events.stdout).NotTo(ContainSubstring(secret))
		Expect(managerLog.String()).To(ContainSubstring("Starting workers"), "the manager's log is captured")
		Expect(managerLog.String()).NotTo(ContainSubstring(secret))

		// etcd holds every write in its write-ahead log and its database:
		// the question's text is there, the secret nowhere.
		Expect(etcdDataDir).NotTo(BeEmpty(), "localcp printed etcd's data directory")
		Eventually(func() bool { return storeContains(etcdDataDir, marker) }, "10s").Should(BeTrue(), "the scan sees what the store holds")
		Expect(storeContains(etcdDataDir, secret)).To(BeFalse(), "the sensitive answer is in etcd's files in the clear")

		// Another ServiceAccount of the namespace with the agent role reads
		// the question, and gets the sealed text only; Secrets it may not read.
		peer := serviceAccountActor(ns, "peer")
		bind(ns, "ClusterRole", "hitl-agent", rbacv1.Subject{Kind: "ServiceAccount", Name: "peer", Namespace: ns})
		Eventually(func() int { return peer.kubectl("-n", ns, "get", "uq/token", "-o", "json").code }).Should(BeZero())
		seen := peer.kubectl("-n", ns, "get", "uq/token", "-o", "json")
		Expect(seen.stdout).To(ContainSubstring(`"sealed"`))
		Expect(seen.stdout).NotTo(ContainSubstring(secret))
		Expect(peer.kubectl("-n", ns, "auth", "can-i", "get", "secrets").stdout).To(ContainSubstring("no"))
	})
})

// storeContains reports whether any file under dir holds s.
func storeContains(dir, s string) bool {
	GinkgoHelper()
	found := false
	Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = bytes.Contains(data, []byte(s))
		return nil
	})).To(Succeed())
	return found
}

// serviceAccountActor creates a ServiceAccount in ns and an actor with a
// kubeconfig holding a token of it.
func serviceAccountActor(ns, name string) actor {
	GinkgoHelper()
	ctx := context.Background()
	Expect(adminClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
	token, _, err := testenv.RequestToken(ctx, adminClient, ns, name, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", admin.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	data, err := testenv.TokenKubeconfig(cfg, name, token, "")
	Expect(err).NotTo(HaveOccurred())
	a := actor{"system:serviceaccount:" + ns + ":" + name, filepath.Join(workDir, "kubeconfig-"+ns+"-"+name)}
	Expect(os.WriteFile(a.kubeconfig, data, 0o600)).To(Succeed())
	return a
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
