// The bench's run: its state, and the workloads it runs one after the
// other, each in its admission mode, from an empty namespace.

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

const ns = "bench"

// bench holds the control plane, the clients and the manager process.
type bench struct {
	s          scale
	env        *envtest.Environment
	c          client.WithWatch
	obs        *observer
	install    testenv.Install
	kubeconfig string // the manager's: its shipped ServiceAccount's token
	managerBin string
	pluginBin  string // kubectl-hitl, for the MCP workloads
	notifyBin  string // hitl-notify, for the notifier workloads
	notifyKube string // hitl-notify's kubeconfig: its shipped ServiceAccount's token
	adminKube  string // an administrator's kubeconfig, for kubectl-hitl mcp
	manager    *exec.Cmd
	synced     chan time.Time
	metrics    string
	pprof      string
	cfg        *rest.Config // the bench's, an administrator's
	outDir     string       // where profiles are written
	mode       testenv.Admission
	hooks      *webhookConfigs // webhook mode's configurations, as envtest made them
	rbacReady  bool            // the manager's ServiceAccount is authorized
	r          *results
	// floorSeen is the floor of a burst of transitions (status writes and
	// Events by a bare client) until the agents' watch saw them all.
	floorSeen time.Duration
	// spreadLead and spreadP99 are the deadline workload's lead before its
	// first spread deadline and the p99 of their lateness.
	spreadLead, spreadP99 time.Duration
}

// none is the baseline's admission: no policy, no webhook, no manager.
const none testenv.Admission = -1

// modeName names an admission mode in the figures: baseline, policies (the
// default install) or webhooks (webhook mode).
func modeName(m testenv.Admission) string {
	if m == none {
		return "baseline"
	}
	return m.String()
}

// binaries are the programs the bench runs: the manager, kubectl-hitl and
// hitl-notify.
type binaries struct {
	manager, plugin, notifier string
}

func runAll(ctx context.Context, s scale, bins binaries, outDir string, only *regexp.Regexp) (*results, error) {
	b := &bench{s: s, managerBin: bins.manager, pluginBin: bins.plugin, notifyBin: bins.notifier, outDir: outDir, mode: none,
		r: &results{Scale: s.Questions, Figures: map[string]float64{}}}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.stop()
	// The settle workloads run in the default install (admission policies,
	// no webhook) and in webhook mode, the others in the default install.
	steps := []struct {
		name string
		mode testenv.Admission
		run  func(context.Context) error
	}{
		{"baseline", none, b.baseline},
		{"settle throughput, policies", testenv.Policies, b.throughputPairs},
		{"settle throughput, webhooks", testenv.WebhookMode, b.throughput},
		{"settle latency, webhooks", testenv.WebhookMode, b.latency},
		{"settle latency, policies", testenv.Policies, b.latency},
		{"approval latency", testenv.Policies, b.approvalLatency},
		{"mcp ask latency", testenv.Policies, b.mcpLatency},
		{"mcp held calls", testenv.Policies, b.mcpHeld},
		{"notify burst", testenv.Policies, b.notifyBurst},
		{"notify reminders", testenv.Policies, b.notifyReminders},
		{"deadline precision", testenv.Policies, b.deadlines},
		{"deadline floor", testenv.Policies, b.deadlineFloor},
		{"claims", testenv.Policies, b.claims},
		{"flood", testenv.Policies, b.flood},
		{"memory", testenv.Policies, b.memory},
		{"restart", testenv.Policies, b.restart},
	}
	if s.Questions > 0 {
		// The scale mode runs alone.
		steps = steps[:0]
		steps = append(steps, struct {
			name string
			mode testenv.Admission
			run  func(context.Context) error
		}{"scale", testenv.Policies, b.atScale})
	}
	for i, st := range steps {
		if st.name != "baseline" && !only.MatchString(st.name) {
			continue
		}
		if err := b.use(ctx, st.mode); err != nil {
			return b.r, fmt.Errorf("setting up %s: %w", modeName(st.mode), err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s\n", st.name)
		if err := st.run(ctx); err != nil {
			return b.r, fmt.Errorf("%s: %w", st.name, err)
		}
		// Each workload runs at its own scale: the next one starts from an
		// empty namespace, except the restart, which needs memory's objects.
		if st.mode != none && st.name != "memory" && i < len(steps)-1 {
			if err := b.clean(ctx); err != nil {
				return b.r, fmt.Errorf("cleaning up after %s: %w", st.name, err)
			}
			if err := b.quiet(ctx); err != nil {
				return b.r, fmt.Errorf("after %s: %w", st.name, err)
			}
		}
	}
	b.ratios()
	return b.r, nil
}

// clean deletes every question, reply and claim of the namespace.
// A delete of every object is one request, which the API server may cut
// off while it is busy (a full run's flood left 10,000 questions, and the
// request ended in a stream reset): it is sent again, a few times.
func (b *bench) clean(ctx context.Context) error {
	for _, obj := range []client.Object{&hitlv1.QuestionReply{}, &hitlv1.UserQuestion{}, &hitlv1.QuestionClaim{}} {
		var err error
		for attempt := range 5 {
			if attempt > 0 {
				fmt.Fprintf(os.Stderr, "bench: cleaning up, again: %v\n", err)
				time.Sleep(2 * time.Second)
			}
			if err = b.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
