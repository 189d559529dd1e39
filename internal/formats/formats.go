package formats

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/internal/buildinfo"
)

// EntryType is one type of Raft log entry (fsm.MessageType): its type
// byte and name.
type EntryType struct {
	Number uint8
	Name   string
	// Skippable: a replica that does not know the type skips the entry
	// instead of stopping (fsm.IgnoreUnknownTypeFlag, the high bit of
	// Number).
	Skippable bool
	// Retired: no version writes it; an entry of it is refused and halts
	// a replica that committed it all the same.
	Retired bool
}

// RecordType is one type of snapshot record (fsm.SnapshotType).
type RecordType struct {
	Number uint8
	Name   string
}

// Wire kinds.
const (
	// KindField is a field of an Ankaios message, numbered from 1000, that
	// an Ankaios peer (or an older Grapnel) skips as unknown.
	KindField = "field"
	// KindMetadata is a gRPC metadata key (request or response header).
	KindMetadata = "metadata"
	// KindReasons is the google.rpc.ErrorInfo reasons of the domain
	// grapnel.io that Grapnel's errors carry.
	KindReasons = "reasons"
	// KindService is one of Grapnel's own gRPC services with its methods.
	KindService = "service"
	// KindBehaviour is a meaning Grapnel gives to a message Ankaios has.
	KindBehaviour = "behaviour"
)

// WireAddition is one thing Grapnel adds to the Ankaios wire.
type WireAddition struct {
	Kind string
	// Name: a field as package.Message.field = number, a metadata key, a
	// service's full name, or the behaviour's short name.
	Name string
	// Items: the reasons, or the service's methods, in order.
	Items []string
	// Note says what it is for, in a few words.
	Note string
}

// Entries are the Raft entry types this release knows, by number.
var Entries = []EntryType{
	{1, "UpdateDesiredState", false, true},
	{2, "AgentConnected", false, false},
	{3, "AgentGone", false, false},
	{4, "AgentLoad", false, true},
	{5, "WorkloadStates", false, true},
	{6, "UpdateDesiredStateSeq", false, true},
	{7, "WorkloadReports", false, false},
	{8, "UpdateDesiredStatePacked", false, false},
	{9, "Batch", false, false},
	{11, "SetAgentMode", false, false},
	{12, "Placement", false, false},
	{14, "LockObjects", false, false},
	{15, "UnlockObjects", false, false},
	{18, "SetClusterVersion", false, false},
	{138, "HistoryNotes", true, false},
	{141, "ProblemsChanged", true, false},
	{144, "ReplicaRemoval", true, false},
	{145, "ReplicaCertificate", true, false},
}

// ClusterVersion is the newest cluster version this release supports
// (state.MaxClusterVersion; docs/upgrade.md): the replicated formats it
// may be asked to write once every voter supports them.
const ClusterVersion = 2

// SnapshotVersion is the snapshot format version this release writes;
// SnapshotVersionsRead are those it restores.
const SnapshotVersion = 2

// SnapshotVersionsRead are the snapshot format versions a restore reads.
var SnapshotVersionsRead = []int{1, 2}

// Records are the snapshot record types this release writes and reads.
var Records = []RecordType{
	{1, "APIVersion"}, {2, "Workload"}, {3, "Config"}, {4, "Rendered"}, {5, "DeleteEdge"},
	{6, "Agent"}, {7, "WorkloadState"}, {8, "Revision"}, {9, "DesiredSeq"}, {10, "ReportMark"},
	{11, "HistoryMeta"}, {12, "Tx"}, {13, "Transition"}, {14, "AgentMode"}, {15, "Placement"},
	{16, "Problems"}, {17, "Guard"}, {18, "RemovedReplica"}, {19, "ReplicaCerts"}, {20, "RevokedCert"}, {21, "ClusterVersion"},
}

// Wire is what this release adds to the Ankaios wire
// (docs/api-compatibility.md).
var Wire = []WireAddition{
	{Kind: KindField, Name: "grpc_api.AgentHello.grapnelIncarnation = 1001", Note: "drops state reports of an agent's earlier life"},
	{Kind: KindField, Name: "grpc_api.AgentHello.grapnelRelease = 1002", Note: "the agent's release"},
	{Kind: KindField, Name: "grpc_api.AgentHello.grapnelClusterVersion = 1003", Note: "the newest cluster version the agent supports"},
	{Kind: KindField, Name: "grpc_api.AgentHello.grapnelStorageFailed = 1004", Note: "the agent's run folder failed, and how"},
	{Kind: KindField, Name: "grpc_api.UpdateWorkloadState.grapnelGeneration = 1001", Note: "orders an agent's state reports"},
	{Kind: KindField, Name: "grpc_api.AgentLoadStatus.grapnelStorageFailed = 1001", Note: "the agent's run folder failed, and how, as it is now"},
	{Kind: KindMetadata, Name: "grapnel-leader-aware", Note: "a follower names the leader instead of proxying"},
	{Kind: KindMetadata, Name: "grapnel-replica-id", Note: "response header: the replica serving a stream"},
	{Kind: KindMetadata, Name: "grapnel-forwarded-by", Note: "the replica proxying a call"},
	{Kind: KindMetadata, Name: "grapnel-forwarded-identity", Note: "the proxied client's identity"},
	{Kind: KindMetadata, Name: "grapnel-forwarded-cert", Note: "the proxied client's certificates"},
	{Kind: KindMetadata, Name: "grapnel-owner", Note: "the owner a client declares for intent locks"},
	{Kind: KindReasons, Name: "grapnel.io", Items: []string{"NOT_LEADER", "NO_LEADER", "SHUTTING_DOWN", "LEADER_CHANGED",
		"UNKNOWN_REPLICA", "NO_VOTE_HOLD", "OTHER_REPLICA", "OUTCOME_UNKNOWN", "QUORUM", "RELEASE_BEHIND", "AVAILABILITY", "UNSUPPORTED_PROTOCOL", "BAD_FIRST_MESSAGE", "UNAUTHENTICATED",
		"PERMISSION_DENIED", "BAD_SNAPSHOT", "SNAPSHOT_TOO_LARGE", "MESSAGE_TOO_LARGE", "TOO_MANY_STREAMS", "BUSY",
		"STATE_CHANGED", "AGENT_NOT_CONNECTED", "UNKNOWN_AGENT", "NO_SUCH_TRANSACTION", "LOCKED", "REVISION_CONFLICT", "INVALID"}},
	{Kind: KindService, Name: "grapnel.Cluster", Items: []string{"Status", "Watch", "RemoveReplica", "AddReplica",
		"TransferLeadership", "SnapshotSave", "SnapshotRestore", "ResyncAgent", "SetAgentMode", "Placement", "Agents", "UpgradeStatus", "UpgradeFinalize", "RepairReplica"}},
	{Kind: KindService, Name: "grapnel.Plan", Items: []string{"DryRun", "Apply", "Revision"}},
	{Kind: KindService, Name: "grapnel.History", Items: []string{"List", "Get", "Timeline"}},
	{Kind: KindService, Name: "grapnel.Problems", Items: []string{"List"}},
	{Kind: KindService, Name: "grapnel.Locks", Items: []string{"Lock", "Unlock", "List"}},
	{Kind: KindBehaviour, Name: "resync-request", Note: "an empty FromServer.updateWorkload asks a Grapnel agent for a drift repair round"},
}

// Text is the formats as --version prints them after the version line:
// one entry type, record type or wire addition per line, so that the
// output of two releases compares with diff.
func Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster version %d (supports 0 to %d)\n", ClusterVersion, ClusterVersion)
	b.WriteString("raft entry types (skippable: a replica that does not know it skips it; retired: refused):\n")
	for _, e := range Entries {
		flag := ""
		switch {
		case e.Retired:
			flag = " retired"
		case e.Skippable:
			flag = " skippable"
		}
		fmt.Fprintf(&b, "  %3d %s%s\n", e.Number, e.Name, flag)
	}
	read := make([]string, len(SnapshotVersionsRead))
	for i, v := range SnapshotVersionsRead {
		read[i] = strconv.Itoa(v)
	}
	fmt.Fprintf(&b, "snapshot format %d (restores %s), record types:\n", SnapshotVersion, strings.Join(read, ", "))
	for _, r := range Records {
		fmt.Fprintf(&b, "  %3d %s\n", r.Number, r.Name)
	}
	b.WriteString("wire additions beyond Ankaios v1 (an Ankaios peer skips or never uses them):\n")
	for _, w := range Wire {
		line := "  " + w.Kind + " " + w.Name
		if len(w.Items) > 0 {
			line += ": " + strings.Join(w.Items, " ")
		}
		if w.Note != "" {
			line += " (" + w.Note + ")"
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// VersionText is what --version prints: the version line of program
// (buildinfo.Line) and, under it, the formats (Text), ending in a newline.
// The first line stays what it was, for scripts that read only it.
func VersionText(program, protocolVersion string) string {
	return buildinfo.Line(program, protocolVersion) + "\n" + Text()
}
