package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// target names a question (or, for withdraw, a reply) in a namespace.
type target struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the question's the card showed, for a reply: a question
	// re-created under the same name since is not answered by it.
	UID types.UID `json:"uid,omitempty"`
}

type replyRequest struct {
	target
	// SpecDigest is the question's status.specDigest the card showed;
	// empty when the card was shown before the controller wrote it.
	SpecDigest string              `json:"specDigest,omitempty"`
	Answers    []hitlv1.AnswerItem `json:"answers"`
}

// outcomeResponse is what the page shows after a reply.
type outcomeResponse struct {
	Reply       string `json:"reply"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	Explanation string `json:"explanation,omitempty"`
}

// problem is an error as the page shows it: the message starts with the
// code, when there is one, and names the field.
type problem struct {
	Code        string `json:"code,omitempty"`
	QuestionID  string `json:"questionID,omitempty"`
	Field       string `json:"field,omitempty"`
	Message     string `json:"message"`
	Explanation string `json:"explanation,omitempty"`
}

// holder names a person's Answerer in its logs; the holder of their
// claims is who the API server authenticates them as.
func holder(p Person) string { return p.Username + " (web)" }

// serveReply validates a batch against the question with api/v1alpha1/validation
// (BAD_ANSWER creates nothing), creates the QuestionReply as the person,
// bound to the question the card showed (its uid and spec digest), and
// waits for the controller's outcome. A second vote of the person on a
// governed question creates nothing either (DUPLICATE_VOTE).
//
// The answers of sensitive questions come sealed by the page
// (static/seal.js) and are passed on as they are; one in the clear is
// refused, never sealed here: the inbox does not hold such a value.
func (s *Server) serveReply(w http.ResponseWriter, r *http.Request, p Person) {
	var req replyRequest
	a, ok := s.answererFor(w, r, p, &req, &req.target)
	if !ok {
		return
	}
	if err := s.refuseInTheClear(r.Context(), p, &req); err != nil {
		writeError(w, err)
		return
	}
	reply := &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{GenerateName: req.Name + "-", Namespace: req.Namespace},
		Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: req.Name, UID: req.UID, SpecDigest: req.SpecDigest},
			Answers:     req.Answers,
		},
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.ReplyTimeout)
	defer cancel()
	out, err := a.Create(ctx, reply)
	if err != nil {
		if reply.Name != "" && ctx.Err() != nil {
			// Created, but the controller has not decided yet (it may be
			// down): the card follows the question.
			writeJSON(w, http.StatusAccepted, outcomeResponse{Reply: reply.Name,
				Message: fmt.Sprintf("reply %s was sent; the controller has not decided on it yet", reply.Name)})
			return
		}
		writeError(w, err)
		return
	}
	// The card is answered: its claim has done its job.
	s.claims.releaseQuestion(p.key(), req.Namespace, req.Name)
	res := outcomeResponse{Reply: out.Reply, Outcome: string(out.Outcome), Reason: string(out.Reason), Message: out.Message}
	res.Explanation = explain(string(out.Outcome))
	if out.Outcome == hitlv1.OutcomeRejected || out.Outcome == hitlv1.OutcomeClosed {
		res.Explanation = explain(string(out.Reason))
	}
	writeJSON(w, http.StatusOK, res)
}

// refuseInTheClear checks the batch of an ask with sensitive questions
// before the answerer sees it, which would seal their free text in this
// process: ValidateAnswers refuses plain text for them (BAD_ANSWER),
// without the text. A question that is not there is the answerer's to
// report.
func (s *Server) refuseInTheClear(ctx context.Context, p Person, req *replyRequest) error {
	c, err := s.opts.Clients(p)
	if err != nil {
		return err
	}
	q := &hitlv1.UserQuestion{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, q); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !slices.ContainsFunc(q.Spec.Questions, func(q hitlv1.Question) bool { return q.Sensitive }) {
		return nil
	}
	return validation.ValidateAnswers(q.Spec.Questions, req.Answers)
}

type claimResponse struct {
	ID          string `json:"id"`
	Claim       string `json:"claim"`
	RemainingMs int64  `json:"remainingMs"`
	Deadline    int64  `json:"deadline,omitempty"`
	Lost        string `json:"lost,omitempty"`
}

// serveClaim claims a question for the person while its card is open; a
// second claim of the same person on the same question (another tab) is
// the first one.
func (s *Server) serveClaim(w http.ResponseWriter, r *http.Request, p Person) {
	var req target
	a, ok := s.answererFor(w, r, p, &req, &req)
	if !ok {
		return
	}
	if c := s.claims.find(p.key(), req.Namespace, req.Name); c != nil {
		writeJSON(w, http.StatusOK, claimView(c))
		return
	}
	claim, err := a.Claim(s.ctx, req.Name, s.opts.ClaimDuration)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := randomString(16)
	if err != nil {
		_ = claim.Close()
		writeError(w, err)
		return
	}
	c := &heldClaim{id: id, owner: p.key(), namespace: req.Namespace, question: req.Name, claim: claim}
	s.claims.add(c)
	writeJSON(w, http.StatusOK, claimView(c))
}

func claimView(c *heldClaim) claimResponse {
	v := claimResponse{ID: c.id, Claim: c.claim.Name, RemainingMs: c.claim.Remaining.Milliseconds()}
	if !c.claim.Deadline.IsZero() {
		v.Deadline = c.claim.Deadline.UnixMilli()
	}
	if err := c.claim.Err(); err != nil {
		v.Lost = err.Error()
	}
	return v
}

type claimID struct {
	ID string `json:"id"`
}

// serveHeartbeat keeps a claim: its card is open and its person active.
func (s *Server) serveHeartbeat(w http.ResponseWriter, r *http.Request, p Person) {
	var req claimID
	if !decode(w, r, &req) {
		return
	}
	c := s.claims.touch(p.key(), req.ID)
	if c == nil {
		writeProblem(w, http.StatusNotFound, "", "the claim is no longer held: it was released after the page went quiet")
		return
	}
	writeJSON(w, http.StatusOK, claimView(c))
}

// serveRelease releases a claim: the card was closed or its countdown ended.
func (s *Server) serveRelease(w http.ResponseWriter, r *http.Request, p Person) {
	var req claimID
	if !decode(w, r, &req) {
		return
	}
	s.claims.release(p.key(), req.ID)
	w.WriteHeader(http.StatusNoContent)
}

// serveWithdraw withdraws the person's queued reply.
func (s *Server) serveWithdraw(w http.ResponseWriter, r *http.Request, p Person) {
	var req target
	a, ok := s.answererFor(w, r, p, &req, &req)
	if !ok {
		return
	}
	if err := a.Withdraw(r.Context(), req.Name); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// answererFor decodes a request into body and returns an answerer acting
// as the person in the namespace its target names.
func (s *Server) answererFor(w http.ResponseWriter, r *http.Request, p Person, body any, t *target) (*answerer.Answerer, bool) {
	if !decode(w, r, body) {
		return nil, false
	}
	if t.Namespace == "" || t.Name == "" {
		writeProblem(w, http.StatusBadRequest, "", "the request must name a namespace and a name (namespace, name)")
		return nil, false
	}
	if !s.namespaceServed(t.Namespace) {
		writeProblem(w, http.StatusForbidden, "", fmt.Sprintf("this inbox does not serve namespace %q (namespace)", t.Namespace))
		return nil, false
	}
	c, err := s.opts.Clients(p)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return answerer.New(c, t.Namespace, holder(p)), true
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		writeProblem(w, http.StatusBadRequest, "", "the request body is not valid JSON for this call: "+err.Error())
		return false
	}
	return true
}

// writeError answers with a coded error's code, question and field, or
// the API server's status for another error.
func writeError(w http.ResponseWriter, err error) {
	var v *validation.Error
	if errors.As(err, &v) {
		status := http.StatusConflict
		switch v.Code {
		case hitlv1.CodeBadAnswer:
			status = http.StatusUnprocessableEntity
		case hitlv1.CodeForbidden:
			status = http.StatusForbidden
		}
		writeJSON(w, status, problem{Code: string(v.Code), QuestionID: v.QuestionID, Field: v.Field,
			Message: err.Error(), Explanation: explain(string(v.Code))})
		return
	}
	status := http.StatusBadGateway
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code >= 400 {
		status = int(st.Status().Code)
	}
	writeProblem(w, status, "", err.Error())
}

func writeProblem(w http.ResponseWriter, status int, code, msg string) {
	if code != "" && !strings.HasPrefix(msg, code) {
		msg = code + ": " + msg
	}
	writeJSON(w, status, problem{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
