package main

import (
	"reflect"
	"slices"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// approvalStats are the figures of the governed questions (those with
// status.approval): how many, how many settled, the votes they counted,
// the replies Counted and refused DUPLICATE_VOTE, and how many of the
// approval invariants were evaluated.
type approvalStats struct {
	Governed       int `json:"governedQuestions"`
	Settled        int `json:"governedSettled"`
	Votes          int `json:"votes"`
	SettledVotes   int `json:"settlementVotes"`
	Counted        int `json:"countedReplies"`
	DuplicateVotes int `json:"duplicateVotes"`
	SelfApprovals  int `json:"selfApprovals"`
	Checked        int `json:"invariantsChecked"`
}

// approvals checks a governed question: its rule (status.approval) never
// changes once written; no identity votes twice; and a Settled one was
// decided by its rule: approved by at least status.approval.approvals
// distinct identities, the requester not among them when the rule
// excludes it, every set's minimum met by the approving votes naming it,
// each vote the vote of a reply to it whose stamped author it names (and
// a member of the sets it names), the deciding reply's vote last; or, when
// its answers reject, rejected by a veto or by as many rejections as
// approvals.
func (c *checker) approvals(name string) {
	vs := c.h.questions[name]
	obj := "question/" + name
	s := &c.rep.Approvals
	var rule *hitlv1.EffectiveApproval
	changed, twice := false, false
	for _, v := range vs {
		q := v.Object
		if v.Deleted {
			continue
		}
		if rule == nil {
			rule = q.Status.Approval
		} else {
			s.Checked++
			if !changed && !reflect.DeepEqual(rule, q.Status.Approval) {
				changed = true
				c.violate("approval-changed", obj, "status.approval went from %+v to %+v (rv %s): it is fixed when the question is asked",
					*rule, q.Status.Approval, q.ResourceVersion)
			}
		}
		lists := [][]hitlv1.Vote{q.Status.Votes}
		if q.Status.Settlement != nil {
			lists = append(lists, q.Status.Settlement.Votes)
		}
		for _, votes := range lists {
			s.Checked++
			if u := twiceVoted(votes); u != "" && !twice {
				twice = true
				c.violate("voted-twice", obj, "%s has two votes (rv %s): each identity votes once", u, q.ResourceVersion)
			}
		}
	}
	last := lastQuestion(vs)
	if rule == nil {
		rule = last.Status.Approval
	}
	if rule == nil {
		return
	}
	s.Governed++
	s.Votes += len(last.Status.Votes)
	if last.Status.State != hitlv1.StateSettled || last.Status.Settlement == nil {
		return
	}
	s.Settled++
	st := last.Status.Settlement
	s.SettledVotes += len(st.Votes)
	if n := len(st.Votes); n == 0 || st.Votes[n-1].Reply != st.Reply {
		c.violate("quorum", obj, "settled by reply %s, which is not the last of settlement.votes %v", st.Reply, voters(st.Votes))
	}
	s.Checked++
	sets := map[string]hitlv1.ApproverSet{}
	for _, set := range rule.From {
		sets[set.Name] = set
	}
	for _, v := range st.Votes {
		s.Checked++
		r := c.replyOfVote(name, v)
		if r == nil {
			c.violate("vote-without-reply", obj, "the vote of %s names reply %s (uid %s), and no reply to the question with that name and uid was seen",
				v.By.Username, v.Reply, v.ReplyUID)
			continue
		}
		if r.Spec.AnsweredBy == nil || r.Spec.AnsweredBy.Username != v.By.Username {
			c.violate("vote-without-reply", obj, "the vote of %s names reply %s, whose stamped author is %v", v.By.Username, v.Reply, r.Spec.AnsweredBy)
			continue
		}
		for _, name := range v.Sets {
			s.Checked++
			set, ok := sets[name]
			if !ok || !memberOf(&set, r.Spec.AnsweredBy) {
				c.violate("vote-set-membership", obj, "the vote of %s counts for set %s, of which the reply's author %v is not a member (rule sets %v)",
					v.By.Username, name, *r.Spec.AnsweredBy, rule.From)
			}
		}
	}
	approvers, rejecters := map[string]bool{}, map[string]bool{}
	perSet := map[string]map[string]bool{}
	for _, v := range st.Votes {
		switch v.Choice {
		case hitlv1.VoteApprove:
			approvers[v.By.Username] = true
			for _, set := range v.Sets {
				if perSet[set] == nil {
					perSet[set] = map[string]bool{}
				}
				perSet[set][v.By.Username] = true
			}
		case hitlv1.VoteReject:
			rejecters[v.By.Username] = true
		}
	}
	s.Checked++
	if choiceOfAnswers(last, last.Status.Answers) == hitlv1.VoteReject {
		if len(rejecters) == 0 || !rule.Veto && len(rejecters) < int(rule.Approvals) {
			c.violate("quorum", obj, "settled as rejected with %d rejecting identities (veto %t, approvals %d): %v",
				len(rejecters), rule.Veto, rule.Approvals, voters(st.Votes))
		}
		return
	}
	if len(approvers) < int(rule.Approvals) {
		c.violate("quorum", obj, "settled with %d distinct approvers, fewer than the %d its rule requires: %v",
			len(approvers), rule.Approvals, voters(st.Votes))
	}
	s.Checked++
	if rule.ExcludeRequester && last.Spec.AskedBy != nil && approvers[last.Spec.AskedBy.Username] {
		c.violate("self-approval", obj, "settled with the vote of %s, who asked it, though its rule excludes the requester", last.Spec.AskedBy.Username)
	}
	for _, set := range rule.From {
		s.Checked++
		if len(perSet[set.Name]) < int(set.Minimum) {
			c.violate("quorum", obj, "settled with %d approvers from set %s, fewer than its minimum %d: %v",
				len(perSet[set.Name]), set.Name, set.Minimum, voters(st.Votes))
		}
	}
}

// counted checks that a Counted reply is a vote of its question: in the
// last status.votes seen, by name and uid.
func (c *checker) counted(obj string, r *hitlv1.QuestionReply, q *hitlv1.UserQuestion) {
	c.rep.Approvals.Counted++
	c.rep.Approvals.Checked++
	if q.Status.Approval == nil {
		c.violate("counted-not-a-vote", obj, "Counted, but question %s is not governed (no status.approval)", q.Name)
		return
	}
	if !slices.ContainsFunc(q.Status.Votes, func(v hitlv1.Vote) bool { return v.Reply == r.Name && (v.ReplyUID == "" || v.ReplyUID == r.UID) }) {
		c.violate("counted-not-a-vote", obj, "Counted, but question %s has no vote of it: %v", q.Name, voters(q.Status.Votes))
	}
}

// replyOfVote is the last version of the reply to the question that the
// vote names, by name and uid; nil when none was seen.
func (c *checker) replyOfVote(question string, v hitlv1.Vote) *hitlv1.QuestionReply {
	vs := c.h.replies[v.Reply]
	for i := len(vs) - 1; i >= 0; i-- {
		r := vs[i].Object
		if r.Spec.QuestionRef.Name == question && (v.ReplyUID == "" || r.UID == v.ReplyUID) {
			return r
		}
	}
	return nil
}

func twiceVoted(votes []hitlv1.Vote) string {
	seen := map[string]bool{}
	for _, v := range votes {
		if seen[v.By.Username] {
			return v.By.Username
		}
		seen[v.By.Username] = true
	}
	return ""
}

func voters(votes []hitlv1.Vote) []string {
	var out []string
	for _, v := range votes {
		out = append(out, v.By.Username+":"+string(v.Choice)+":"+v.Reply)
	}
	return out
}

// memberOf says whether the reply's stamped author belongs to the set: by
// username, or by a group stamped on the reply.
func memberOf(s *hitlv1.ApproverSet, by *hitlv1.UserInfo) bool {
	return slices.Contains(s.Users, by.Username) || slices.ContainsFunc(by.Groups, func(g string) bool { return slices.Contains(s.Groups, g) })
}

// choiceOfAnswers is what a batch says of the question's approvals, as
// docs/approvals.md defines it (written here again, not imported, so that
// the checker does not share the controller's mistakes): Approve when it
// selects the approving option (or the "always" one) of every Approval
// question and the approving option of every PlanReview question, Reject
// otherwise; a question without either intent approves.
func choiceOfAnswers(q *hitlv1.UserQuestion, answers []hitlv1.AnswerItem) hitlv1.VoteChoice {
	for _, qq := range q.Spec.Questions {
		if qq.Intent == nil {
			continue
		}
		var sel []string
		for _, a := range answers {
			if a.ID == qq.ID && a.Custom == "" {
				sel = a.Selected
			}
		}
		switch {
		case qq.Intent.Approval != nil:
			ap := qq.Intent.Approval
			if len(sel) != 1 || sel[0] != ap.Approve && (ap.Always == "" || sel[0] != ap.Always) {
				return hitlv1.VoteReject
			}
		case qq.Intent.PlanReview != nil:
			if len(sel) != 1 || sel[0] != qq.Intent.PlanReview.Approve {
				return hitlv1.VoteReject
			}
		}
	}
	return hitlv1.VoteApprove
}
