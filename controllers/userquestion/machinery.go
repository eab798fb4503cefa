package userquestion

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hitl-dev/hitl/controllers/claimreads"
)

// The machinery the reconciler runs on lives in packages of its own under
// controllers/, each used here through the interface below, so that this
// package reads as the question's domain and each piece is tested alone.

// WindowCloser closes windows off the workers (controllers/closer): a
// worker decides that a window closes and hands the slow rest to a close
// of its own.
type WindowCloser interface {
	// Source hands the closer the controller's queue and context when the
	// controller starts.
	Source() source.Source
	// Owns reports whether a close of key is in flight, and if so notes
	// that the question needs another look once it is done.
	Owns(key types.NamespacedName) bool
	// Start runs finish for key in a close of its own and reports true,
	// or reports false when the caller is to finish on the worker.
	Start(ctx context.Context, key types.NamespacedName, finish func(context.Context) (ctrl.Result, error)) (bool, error)
}

// ClaimReader reads the claims from the API server, around the cache,
// before a window closes (controllers/claimreads).
type ClaimReader interface {
	// Since returns a read of the claims sent no earlier than t.
	Since(ctx context.Context, t time.Time) (*claimreads.Read, error)
}

// EventRecorder records the Events users see, off the workers and within
// each namespace's budget (controllers/eventbudget).
type EventRecorder interface {
	events.EventRecorder
	// Pending reports whether an Event about the object with this uid is
	// still waiting to be written: an expired question is deleted only
	// once its Events are out.
	Pending(uid types.UID) bool
	// Wake says that a status write has returned: Events held back while
	// status writes were busy may go.
	Wake()
}
