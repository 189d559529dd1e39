// Package authz decides which identity may make which call: one table
// maps every gRPC method a replica serves, and every kind of request an
// Ankaios stream carries, to the right it needs; each right is held by
// some roles (internal/identity). Interceptors (guard.go) check the
// method of every call; the server checks each message of a stream
// against the same table (Check with a Request kind). Without TLS
// (identity.Insecure) everything is allowed, as before roles existed.
package authz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// Right is what a call needs.
type Right uint8

// The rights, from the most open to the narrowest.
const (
	// Status is reading cluster health and the leader's address: agents
	// and CLIs need it to find the leader, so every role holds it.
	Status Right = iota + 1
	// ReadState is reading the desired and current state, the history,
	// plans, problems, locks and placement.
	ReadState
	// ChangeState is changing the desired state and taking one's own
	// intent locks.
	ChangeState
	// Administer is cluster administration: removing or adding replicas,
	// moving leadership, saving and restoring snapshots, overriding
	// another owner's lock, setting agent modes, resyncing agents.
	Administer
	// AgentStream is the agent connection: an agent says AgentHello as
	// itself and reports its own workloads (the server checks both per
	// message).
	AgentStream
)

var rightNames = [...]string{
	Status:      "reading the cluster status",
	ReadState:   "reading the state",
	ChangeState: "changing the desired state",
	Administer:  "cluster administration",
	AgentStream: "the agent connection",
}

func (r Right) String() string {
	if int(r) < len(rightNames) && rightNames[r] != "" {
		return rightNames[r]
	}
	return fmt.Sprintf("right(%d)", uint8(r))
}

// Holders are the roles that hold each right. A replica holds only
// Status of its own: what it forwards for a client is checked as that
// client (guard.go).
var Holders = map[Right][]identity.Role{
	Status:      {identity.Replica, identity.Agent, identity.Operator, identity.Commander},
	ReadState:   {identity.Operator, identity.Commander},
	ChangeState: {identity.Operator, identity.Commander},
	Administer:  {identity.Operator},
	AgentStream: {identity.Agent},
}

// Request kinds of the Ankaios streams and other checks that are not a
// gRPC method of their own, named like methods so that the table, the
// log and the metrics name them the same way.
const (
	UpdateState   = "/ank_base.Request/updateStateRequest"
	CompleteState = "/ank_base.Request/completeStateRequest"
	Logs          = "/ank_base.Request/logsRequest"
	LogsCancel    = "/ank_base.Request/logsCancelRequest"
	EventsCancel  = "/ank_base.Request/eventsCancelRequest"
	// UnlockForce is Unlock with force: releasing another owner's lock.
	UnlockForce = grapnelpb.Locks_Unlock_FullMethodName + "(force)"
	// ReportStates names, in logs and metrics, an agent's report of
	// workload states on another agent, which no role may make: an agent
	// reports only its own (the server checks the names, not the table).
	ReportStates = grpcapi.AgentConnection_ConnectAgent_FullMethodName + "(UpdateWorkloadState)"
)

// Methods is the authorization table: the right each full gRPC method
// name, request kind or check needs. A method missing here is refused
// (table_test.go fails for any method a replica serves that is missing).
var Methods = map[string]Right{
	// The Ankaios streams. Which requests a CLI stream may carry is
	// checked per message (the kinds below).
	grpcapi.AgentConnection_ConnectAgent_FullMethodName:     AgentStream,
	grpcapi.CliConnection_ConnectCli_FullMethodName:         ReadState,
	grpcapi.CommandConnection_ConnectCommand_FullMethodName: ReadState,
	UpdateState:   ChangeState,
	CompleteState: ReadState,
	Logs:          ReadState,
	LogsCancel:    ReadState,
	EventsCancel:  ReadState,

	grapnelpb.Cluster_Status_FullMethodName:             Status,
	grapnelpb.Cluster_Watch_FullMethodName:              Status,
	grapnelpb.Cluster_RemoveReplica_FullMethodName:      Administer,
	grapnelpb.Cluster_AddReplica_FullMethodName:         Administer,
	grapnelpb.Cluster_TransferLeadership_FullMethodName: Administer,
	grapnelpb.Cluster_SnapshotSave_FullMethodName:       Administer,
	grapnelpb.Cluster_SnapshotRestore_FullMethodName:    Administer,
	grapnelpb.Cluster_ResyncAgent_FullMethodName:        Administer,
	grapnelpb.Cluster_SetAgentMode_FullMethodName:       Administer,
	grapnelpb.Cluster_Placement_FullMethodName:          ReadState,
	grapnelpb.Cluster_Agents_FullMethodName:             ReadState,
	grapnelpb.Cluster_UpgradeStatus_FullMethodName:      Status,
	grapnelpb.Cluster_UpgradeFinalize_FullMethodName:    Administer,
	grapnelpb.Cluster_RepairReplica_FullMethodName:      Administer,

	grapnelpb.Plan_DryRun_FullMethodName:   ReadState,
	grapnelpb.Plan_Apply_FullMethodName:    ChangeState,
	grapnelpb.Plan_Revision_FullMethodName: ReadState,

	grapnelpb.History_List_FullMethodName:     ReadState,
	grapnelpb.History_Get_FullMethodName:      ReadState,
	grapnelpb.History_Timeline_FullMethodName: ReadState,

	grapnelpb.Problems_List_FullMethodName: ReadState,

	grapnelpb.Locks_Lock_FullMethodName:   ChangeState,
	grapnelpb.Locks_Unlock_FullMethodName: ChangeState,
	grapnelpb.Locks_List_FullMethodName:   ReadState,
	UnlockForce:                           Administer,
}

// Check says whether id may make the call method (a full gRPC method
// name or one of the kinds above): nil, or an error that is
// errs.ErrPermissionDenied naming the identity and the missing right.
func Check(id identity.Identity, method string) error {
	if id.IsInsecure() {
		return nil
	}
	r, ok := Methods[method]
	if !ok {
		return fmt.Errorf("%w: %s may not call %s: the method is not in the authorization table", errs.ErrPermissionDenied, Who(id), method)
	}
	if slices.Contains(Holders[r], id.Role) {
		return nil
	}
	return Denied(id, ShortName(method), r)
}

// Denied is the refusal of what to id for want of right r.
func Denied(id identity.Identity, what string, r Right) error {
	roles := make([]string, 0, len(Holders[r]))
	for _, h := range Holders[r] {
		roles = append(roles, h.String())
	}
	needs := "the " + strings.Join(roles, " or ") + " role"
	return fmt.Errorf("%w: %s may not %s: %s needs %s", errs.ErrPermissionDenied, Who(id), what, r, needs)
}

// Who names an identity in a refusal: "agent 'agent_A'", and for a
// forwarded one the certificate it came with: "operator 'alice' via
// replica 's2' (serial 1f…)".
func Who(id identity.Identity) string {
	var s string
	switch {
	case id.IsInsecure():
		return "an unauthenticated peer"
	case !id.Typed:
		s = fmt.Sprintf("%s '%s' (untyped certificate)", id.Role, id.Name)
	default:
		s = fmt.Sprintf("%s '%s'", id.Role, id.Name)
	}
	if id.Via != "" {
		s += " via " + id.Via
	}
	return s
}

// ShortName is the last part of a method name, as a refusal names it:
// "SnapshotSave", "updateStateRequest", "Unlock(force)".
func ShortName(method string) string {
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		return method[i+1:]
	}
	return method
}

// RequestKind is the table's name of an Ankaios request's kind, e.g.
// UpdateState; an unknown kind gets a name the table does not hold,
// which only the insecure mode passes.
func RequestKind(r *ankbase.Request) string {
	if f := r.ProtoReflect().WhichOneof(requestContent); f != nil {
		return "/ank_base.Request/" + string(f.Name())
	}
	return "/ank_base.Request/(unknown)"
}

// requestContent is the oneof of ank_base.Request that names its kind.
var requestContent = (&ankbase.Request{}).ProtoReflect().Descriptor().Oneofs().ByName("RequestContent")
