// Package campaign runs Grapnel's chaos campaign: three replicas and three
// agents, each pair in its own network namespace (chaos/netns), concurrent
// clients in a fourth namespace (chaos/clients, run as a separate process
// through nsenter), an observer that asks every replica for its status
// every 50 ms, and a schedule of faults — kills, a frozen leader,
// partitions, agent cuts, a whole-cluster restart, a replica replaced,
// packet loss, latency, an intruder and a replica moved between the
// previous release and this build (upgrade.go), and the flash faults — a
// power cut of every host, a replica's disk full, read-only or failing
// its fsyncs, on a chaos/flashfs mount per host (flash.go, power.go,
// storage.go) — drawn from a seed or scripted.
//
// For every fault the campaign measures the time to a new leader (when
// the leader changed), to the next acknowledged write sent after the
// fault, and to every agent attached to the leader; for a flash fault
// also the time to detect it and to repair it, the writers' share of
// acknowledged writes meanwhile and the acknowledged writes it lost
// (flashmeasure.go). After the faults heal it runs the checkers of
// chaos/check on what it recorded, then restarts the cluster with
// hashicorp/raft's default timing and measures a few leader kills for
// comparison. Everything goes into a chaos/report Report in the run
// directory.
//
// The schedule (Plan) and the measurements (NewLeaderAt, NextAckAt,
// AllAttachedAt, Figures, MeasureFlash, LostAcross) are pure functions,
// tested on synthetic data; Run is the part that needs root and real
// processes.
package campaign
