// Package admission_test runs one table of admission cases (who may ask as
// an agent, the agent label, the largest timeout, a reply's stamped author,
// who may answer, a reply that names another agent, a reply to a settled
// question) against a real kube-apiserver in each admission mode hitl
// ships: the admission policies alone (the default install), the policies
// with the feedback webhook, and webhook mode (the validating policies with
// the mutating webhooks, for clusters without MutatingAdmissionPolicy).
// Every act under test is made by a real identity, a ServiceAccount with a
// TokenRequest token or a user with a client certificate, granted what it
// may do with the example roles hitl ships (config/rbac/examples) and
// ordinary Roles; the admin only sets the scene up and reads the result.
package admission_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

func TestAdmission(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission suite")
}

// modes are the admission modes the table runs in, one cluster each.
var modes = []testenv.Admission{testenv.Policies, testenv.Feedback, testenv.WebhookMode}

// clusters are the started clusters, by mode.
var clusters = map[testenv.Admission]*cluster{}

// The clusters start one after the other (a control plane takes the two
// cores of a small machine for a few seconds), before any case runs, and
// stop after the last.
var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()
	for _, mode := range modes {
		start := time.Now()
		c, err := startCluster(mode)
		Expect(err).NotTo(HaveOccurred(), "starting the %s cluster", mode)
		clusters[mode] = c
		Expect(c.installExampleRoles()).To(Succeed())
		GinkgoWriter.Printf("the %s cluster started in %s\n", mode, time.Since(start).Round(time.Millisecond))
	}
})

var _ = AfterSuite(func() {
	for _, mode := range modes {
		if c := clusters[mode]; c != nil {
			Expect(c.stop()).To(Succeed(), "stopping the %s cluster", mode)
		}
	}
})

// startCluster starts a control plane whose admission is mode, and a
// manager.
func startCluster(mode testenv.Admission) (*cluster, error) {
	k, err := testenv.StartCluster(manager.DefaultConfig(), testenv.Options{Admission: mode})
	if err != nil {
		return nil, err
	}
	return &cluster{mode: mode, env: k.Env, cfg: k.Config, admin: k.Client, stop: k.Stop}, nil
}
