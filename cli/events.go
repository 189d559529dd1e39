package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// eventOrder puts the event's own fields first, then orders the complete
// state inside it like `get state`.
func eventOrder(path []string) []string {
	if len(path) == 0 {
		return []string{"timestamp", "addedFields", "updatedFields", "removedFields", "completeState"}
	}
	if path[0] == "completeState" {
		return completeStateOrder(path[1:])
	}
	return nil
}

// EventTree is the printed form of one event, as ank prints it: the time
// it was received (see EventTimestamp), the altered field paths the server
// sent, each list left out when it is empty (the initial state of -c has
// none), and the complete state it carried, without the fields `get state`
// leaves out when they are empty.
// swdd~cli-outputs-events-with-timestamp~1
func EventTree(at time.Time, resp *ankbase.CompleteStateResponse) map[string]any {
	ev := map[string]any{"timestamp": plainScalar(EventTimestamp(at))}
	if cs := resp.GetCompleteState(); cs != nil {
		ev["completeState"] = printedState(rpc.CompleteStateToTree(cs))
	}
	af := resp.GetAlteredFields()
	for key, paths := range map[string][]string{
		"addedFields":   af.GetAddedFields(),
		"updatedFields": af.GetUpdatedFields(),
		"removedFields": af.GetRemovedFields(),
	} {
		if len(paths) > 0 {
			ev[key] = paths
		}
	}
	return ev
}

// EventTimestamp formats the receive time of an event as ank does
// (chrono's DateTime<Utc>::to_rfc3339): RFC 3339 in UTC with the offset
// written "+00:00", and as many fraction digits (none, 3, 6 or 9) as the
// time needs.
func EventTimestamp(at time.Time) string {
	at = at.UTC()
	frac := ""
	switch ns := at.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		frac = fmt.Sprintf(".%03d", ns/1_000_000)
	case ns%1_000 == 0:
		frac = fmt.Sprintf(".%06d", ns/1_000)
	default:
		frac = fmt.Sprintf(".%09d", ns)
	}
	return at.Format("2006-01-02T15:04:05") + frac + "+00:00"
}

// FormatEvent renders one event: a YAML document opened by "---", or one
// line of JSON.
// swdd~cli-supports-multiple-output-types-for-events~1
func FormatEvent(ev map[string]any, f Format) (string, error) {
	if f == FormatJSON {
		out, err := EncodeJSON(ev, eventOrder, false)
		return out + "\n", err
	}
	out, err := EncodeYAML(ev, eventOrder)
	if err != nil {
		return "", err
	}
	return "---\n" + strings.TrimRight(out, "\n") + "\n", nil
}

// GetEvents subscribes to state changes under the masks and prints every
// event until ctx ends (Ctrl-C), then cancels the subscription. When the
// stream ends it subscribes again on the new leader (resume.go); the
// state that subscription starts with is not printed again.
// swdd~cli-provides-get-events-command~2
// swdd~cli-subscribes-for-events~1
// swdd~cli-receives-events~1
func (s *Session) GetEvents(ctx context.Context, masks []string, f Format, includeCurrent bool) error {
	var (
		ch     <-chan *ankbase.Response
		cancel = func() {}
		id     string
	)
	defer func() { cancel() }()
	stop := func() {
		s.cancelRequest(id, &ankbase.Request{RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}})
	}
	// subscribe subscribes and returns the first answer, the state under
	// the masks now.
	subscribe := func() (*ankbase.Response, error) {
		cancel()
		req := &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks, SubscribeForEvents: true},
		}}
		var err error
		if ch, cancel, err = s.Conn.Subscribe(ctx, req); err != nil {
			cancel = func() {}
			return nil, err
		}
		id = req.RequestId
		first, err := s.firstResponse(ctx, ch)
		if err != nil {
			return nil, err
		}
		if e := first.GetError(); e != nil {
			return nil, fmt.Errorf("event subscription failed: %s", e.GetMessage())
		}
		s.debugf("subscribed for events with request id %s", id)
		return first, nil
	}
	// resubscribe follows the leader after the stream ended.
	resubscribe := func() error {
		for {
			if err := s.resume(ctx); err != nil {
				return err
			}
			_, err := subscribe()
			if err == nil || !s.streamEnded(err) {
				return err
			}
		}
	}
	first, err := subscribe()
	if err != nil {
		if ctx.Err() != nil {
			if id != "" {
				stop()
			}
			return nil
		}
		return err
	}
	if includeCurrent {
		// The current state is not a change: it carries no altered fields.
		cs := first.GetCompleteStateResponse().GetCompleteState()
		if cs == nil {
			cs = &ankbase.CompleteState{}
		}
		ev := EventTree(s.now(), &ankbase.CompleteStateResponse{CompleteState: cs})
		if err := s.printEvent(ev, f); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			stop()
			return nil
		case resp, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					stop()
					return nil
				}
				if err := resubscribe(); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				continue
			}
			if e := resp.GetError(); e != nil {
				return fmt.Errorf("event subscription failed: %s", e.GetMessage())
			}
			if csr := resp.GetCompleteStateResponse(); csr != nil {
				if err := s.printEvent(EventTree(s.now(), csr), f); err != nil {
					return err
				}
			}
		}
	}
}

func (s *Session) printEvent(ev map[string]any, f Format) error {
	out, err := FormatEvent(ev, f)
	if err != nil {
		return err
	}
	_, err = io.WriteString(s.Out, out)
	return err
}

// firstResponse waits for the first answer of a subscription, bounded by
// the response timeout.
func (s *Session) firstResponse(ctx context.Context, ch <-chan *ankbase.Response) (*ankbase.Response, error) {
	timer := clock.NewTimer(s.clock(), s.timeout())
	defer timer.Stop()
	select {
	case resp, ok := <-ch:
		if !ok {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.connErr()
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("no response from the server within %v", s.timeout())
	}
}
