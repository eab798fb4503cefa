package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"
)

// write is one write request of a manager replica, from the API server's
// audit log.
type write struct {
	Replica    string
	Verb       string
	Resource   string // resource, or resource/subresource
	Name       string
	Code       int
	At         time.Time // when the response completed
	ReceivedAt time.Time
}

// auditLog is what the checks read from the API server's audit log.
type auditLog struct {
	// writes are the replicas' writes (their user agents start with the
	// binaries' names, manager-a and manager-b).
	writes []write
	// claimDeleted is when the API server received the (first successful)
	// deletion of each QuestionClaim: the true end of a released claim,
	// which the recorder's watch sees a moment later.
	claimDeleted map[string]time.Time
	// claimWritten is, for each QuestionClaim, when the API server
	// finished each write of it: when a claim's renewal became visible.
	claimWritten map[string][]time.Time
}

func readAudit(path string) (auditLog, error) {
	a := auditLog{claimDeleted: map[string]time.Time{}, claimWritten: map[string][]time.Time{}}
	writes, err := readWrites(path, func(verb, resource, name string, code int, received, completed time.Time) {
		if resource != "questionclaims" || code >= 300 {
			return
		}
		switch verb {
		case "delete":
			if _, seen := a.claimDeleted[name]; !seen {
				a.claimDeleted[name] = received
			}
		case "create", "update", "patch":
			a.claimWritten[name] = append(a.claimWritten[name], completed)
		}
	})
	a.writes = writes
	return a, err
}

func readWrites(path string, every func(verb, resource, name string, code int, received, completed time.Time)) ([]write, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []write
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 4<<20)
	for s.Scan() {
		var e struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			Received time.Time `json:"requestReceivedTimestamp"`
			Stage2   time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(s.Bytes(), &e); err != nil || e.Stage != "ResponseComplete" {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		every(e.Verb, res, e.ObjectRef.Name, e.ResponseStatus.Code, e.Received, e.Stage2)
		replica, _, _ := strings.Cut(e.UserAgent, "/")
		if replica != "manager-a" && replica != "manager-b" {
			continue
		}
		out = append(out, write{Replica: replica, Verb: e.Verb, Resource: res, Name: e.ObjectRef.Name,
			Code: e.ResponseStatus.Code, At: e.Stage2, ReceivedAt: e.Received})
	}
	return out, s.Err()
}
