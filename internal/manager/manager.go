// Package manager wires hitl's controller and webhooks into a
// controller-runtime manager, the same way for the manager binary, the
// envtest suites, the end-to-end tests and the benchmarks.
package manager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/eventbudget"
	"github.com/hitl-dev/hitl/controllers/userquestion"
	"github.com/hitl-dev/hitl/internal/admission"
)

// Config is what the manager's flags set.
type Config struct {
	// Workers is how many questions are reconciled at once.
	Workers int
	// Webhooks serves the optional admission webhooks when true (webhook
	// mode and the feedback webhook; the default install has none).
	Webhooks bool
	// Clock is the controller's time source; nil means the real clock.
	Clock clock.Clock
	// ContinuedEventsPerMinute is each namespace's budget of Continued
	// Events, refilled over a minute; over it a namespace's Continued
	// Events are summed up in one. Zero means no limit. Settled, Cancelled
	// and rejection Events are never limited.
	ContinuedEventsPerMinute int
	// VoteGather is how long a vote that decides nothing waits for the
	// votes sent with it, to be written with them; zero writes each at
	// once.
	VoteGather time.Duration
	// OpenGather is how long a new question waits for a reply before its
	// Open status is written: answered by then, it is written Settled at
	// once; zero writes Open at once.
	OpenGather time.Duration
	// ClaimFenceNamespace is the manager's own namespace, where it writes
	// the fence that makes its cache current before a window closes
	// (claimreads.Fence); empty reads the claims from the API server.
	ClaimFenceNamespace string
}

// DefaultConfig is the configuration the manager ships with.
func DefaultConfig() Config {
	return Config{Workers: 16, ContinuedEventsPerMinute: eventbudget.ContinuedEventsPerMinute, VoteGather: userquestion.DefaultVoteGather, OpenGather: userquestion.DefaultOpenGather}
}

// CacheOptions are the options of the manager's cache: the controller's
// indexes and what it trims from the objects it keeps.
func CacheOptions() cache.Options { return userquestion.CacheOptions() }

// Setup registers the lifecycle controller, the webhooks when enabled, and
// the health checks with mgr. mgr should be created with CacheOptions() as
// its cache options.
func Setup(mgr ctrl.Manager, c Config) error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Workers <= 0 {
		c.Workers = DefaultConfig().Workers
	}
	events := eventbudget.NewWriter(mgr.GetClient(), mgr.GetScheme(), "hitl-controller", eventbudget.Workers, eventbudget.Queue)
	events.LimitRoutine(string(hitlv1.StateContinued), c.ContinuedEventsPerMinute)
	if err := mgr.Add(events); err != nil {
		return err
	}
	// What explains a slow burst besides hitl's own metrics: how long
	// requests wait for the client's rate limit, how long they take, and
	// how often client-go sent them again (a 429 from the API server's
	// priority and fairness, for one).
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRateLimiterLatency, crmetrics.MetricRequestLatency, crmetrics.MetricRequestRetry)
	r := &userquestion.Reconciler{Client: mgr.GetClient(), Clock: c.Clock, Recorder: events, VoteGather: c.VoteGather, OpenGather: c.OpenGather, ClaimFenceNamespace: c.ClaimFenceNamespace}
	// Through a burst of transitions (shared deadlines, a restart) the
	// status writes go first, and the events follow.
	events.DeferWhile(func() bool { return r.StatusWritesInFlight() >= max(1, c.Workers/2) })
	if err := r.SetupWithManager(mgr, c.Workers); err != nil {
		return fmt.Errorf("setting up the question controller: %w", err)
	}
	// A standby replica keeps its cache warm. controller-runtime starts a
	// kind's informer when a controller first watches it, which for a
	// leader-elected controller is only once it leads; registered here,
	// the informers start with the manager, so a replica that takes over
	// reconciles at once instead of listing everything first.
	for _, obj := range []client.Object{&hitlv1.UserQuestion{}, &hitlv1.QuestionReply{}, &hitlv1.QuestionClaim{}, &hitlv1.ApprovalPolicy{}} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("starting the informer of %T: %w", obj, err)
		}
	}
	if c.Webhooks {
		if err := (&admission.QuestionWebhook{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the question webhooks: %w", err)
		}
		if err := (&admission.ReplyWebhook{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the reply webhooks: %w", err)
		}
		if err := (&admission.ClaimWebhook{}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the claim webhook: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}
