// The approval workload: a question governed by an ApprovalPolicy of two
// approvals, three people voting at once, against a single reply's settle.

package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// approvalAgent is the agent whose questions the bench's policy governs;
// every other bench question stays ungoverned.
const approvalAgent = "bench-approval"

// approvalLatency settles LatencySamples questions of approvalAgent, each
// by three voters sending their votes at once under a policy of two
// approvals, and compares the p99 with a single reply's in the same run
// (the settle latency step, with as many questions open). Then it settles
// plain questions again with the policy in the namespace: what policies
// cost the questions they do not govern.
func (b *bench) approvalLatency(ctx context.Context) error {
	p := &hitlv1.ApprovalPolicy{ObjectMeta: metav1.ObjectMeta{Name: "two-of-three", Namespace: ns},
		Spec: hitlv1.ApprovalPolicySpec{Selector: hitlv1.ApprovalSelector{Agents: []string{approvalAgent}}, Rule: hitlv1.ApprovalRule{Approvals: 2}}}
	if err := b.c.Create(ctx, p); err != nil {
		return fmt.Errorf("creating the approval policy: %w", err)
	}
	voters, err := b.voters(3)
	if err != nil {
		return err
	}
	if err := b.governed(ctx); err != nil {
		return err
	}
	var samples, created, toDecision, toSeen []time.Duration
	together := 0
	for range b.s.LatencySamples {
		s, one, err := b.settleByVotes(ctx, voters)
		if err != nil {
			return err
		}
		samples = append(samples, s.total)
		created, toDecision, toSeen = append(created, s.create), append(toDecision, s.toDecision), append(toSeen, s.toSeen)
		if one {
			together++
		}
	}
	for _, part := range []struct {
		name string
		d    []time.Duration
	}{{"second vote created", created}, {"to decision", toDecision}, {"decision to seen", toSeen}} {
		p50, p99, _ := percentiles(part.d)
		b.r.setMode(fmt.Sprintf("approval 2 of 3 settle latency ms, part: %s, p50", part.name), b.mode, ms(p50))
		b.r.setMode(fmt.Sprintf("approval 2 of 3 settle latency ms, part: %s, p99", part.name), b.mode, ms(p99))
	}
	p50, p99, _ := percentiles(samples)
	b.r.set("approval 2 of 3: settled by one write counting both votes, %", 100*float64(together)/float64(len(samples)))
	b.r.setMode("approval 2 of 3 settle latency ms, p50", b.mode, ms(p50))
	b.r.setMode("approval 2 of 3 settle latency ms, p99", b.mode, ms(p99))
	single, ok := b.r.Figures[figureName(fmt.Sprintf("settle latency ms, %d open, p99", b.s.ManyOpen), testenv.Policies)]
	if ok && single > 0 {
		ratio := ms(p99) / single
		b.r.check("approval 2 of 3 settle p99, × a single reply's", "<= 1.5", fmt.Sprintf("%.2f", ratio), ratio <= 1.5)
	}

	var plain []time.Duration
	for range b.s.LatencySamples {
		d, err := b.settle(ctx)
		if err != nil {
			return err
		}
		plain = append(plain, d.total)
	}
	_, plainP99, _ := percentiles(plain)
	b.r.setMode("settle latency ms with a policy in the namespace, p99", b.mode, ms(plainP99))
	if ok && single > 0 {
		b.r.set("settle p99 with a policy in the namespace, × without", ms(plainP99)/single)
	}
	return nil
}

// voters are clients of n distinct people, each of whom may answer every
// agent.
func (b *bench) voters(n int) ([]client.Client, error) {
	var out []client.Client
	for i := range n {
		u, err := b.env.AddUser(envtest.User{Name: fmt.Sprintf("bench-voter-%d", i), Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return nil, fmt.Errorf("adding voter %d: %w", i, err)
		}
		cfg := u.Config()
		// As the bench's own client: client-go's default of 5 requests a
		// second would hold each vote back, not hitl.
		cfg.QPS, cfg.Burst = 10000, 20000
		c, err := client.New(cfg, client.Options{Scheme: b.c.Scheme()})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// governed waits until the manager's cache has the policy: until a new
// question of approvalAgent is governed by it.
func (b *bench) governed(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		q := approvalAsk(name("probe"))
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		for range 50 {
			time.Sleep(20 * time.Millisecond)
			if err := b.c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
				return err
			}
			if q.Status.State != "" {
				break
			}
		}
		if q.Status.Approval != nil {
			return nil
		}
	}
	return fmt.Errorf("the manager did not govern %s's questions by the bench's policy within 30s", approvalAgent)
}

func approvalAsk(n string) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent(approvalAgent).Label(hitlv1.AgentLabel, approvalAgent).Ask("q", "Proceed?", "yes", "no").Obj()
}

// settleByVotes asks a governed question, sends every voter's approval at
// once, and returns how long from sending them until the agent's watch saw
// the question Settled, in parts (until the second vote was created, from
// then to the decision, from the decision until seen), and whether one
// status write counted both deciding votes (they carry the same time).
func (b *bench) settleByVotes(ctx context.Context, voters []client.Client) (settled, bool, error) {
	q := approvalAsk(name("vote"))
	if err := b.c.Create(ctx, q); err != nil {
		return settled{}, false, err
	}
	sent := time.Now()
	type done struct {
		at  time.Time
		err error
	}
	results := make(chan done, len(voters))
	for i, v := range voters {
		go func() {
			r := answer(q)
			r.Name = fmt.Sprintf("%s-v%d", q.Name, i)
			err := v.Create(ctx, r)
			results <- done{time.Now(), err}
		}()
	}
	var created []time.Time
	for range voters {
		d := <-results
		if d.err != nil {
			return settled{}, false, fmt.Errorf("voting: %w", d.err)
		}
		created = append(created, d.at)
	}
	at, err := b.obs.wait(ctx, q.Name, hitlv1.StateSettled)
	if err != nil {
		return settled{}, false, err
	}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		return settled{}, false, err
	}
	votes := q.Status.Settlement.Votes
	together := len(votes) == 2 && votes[0].At.Equal(&votes[1].At)
	second := created[1] // in the order the creates returned
	s := settled{total: at.Sub(sent), create: second.Sub(sent)}
	if decided, ok := b.obs.decidedAt(q.Name); ok {
		s.toDecision, s.toSeen = decided.Sub(second), at.Sub(decided)
	}
	return s, together, nil
}
