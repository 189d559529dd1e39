package intruder

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// gossipJoin joins the replicas' gossip as a server named c.GossipName,
// with no key, and stays c.Hold: long enough for a leader that admits
// servers from gossip to add it to Raft (it took about 3 s). The join
// counts as accepted when any replica took it; whether it entered the
// Raft configuration the campaign checks from outside.
func gossipJoin(ctx context.Context, c Config) Attempt {
	a := Attempt{Target: "gossip", Channel: "gossip", What: "join as a server named " + c.GossipName + ", without the key"}
	var seeds []string
	for _, t := range c.Targets {
		seeds = append(seeds, t.Gossip)
	}
	if len(seeds) == 0 {
		a.Detail = "no target"
		return a
	}
	local, err := localAddr(seeds[0])
	if err != nil {
		a.Detail = err.Error()
		return a
	}
	meta, err := gossipmeta.Meta{Role: gossipmeta.RoleServer, RaftAddress: net.JoinHostPort(local, "25561"),
		GRPCAddress: net.JoinHostPort(local, "25551"), Version: "intruder"}.Encode()
	if err != nil {
		a.Detail = err.Error()
		return a
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.GossipName
	mc.BindAddr, mc.AdvertiseAddr = local, local
	mc.BindPort = 0 // memberlist picks a port free for UDP and TCP and advertises it
	mc.Delegate = metaDelegate(meta)
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		a.Detail = "memberlist: " + err.Error()
		return a
	}
	defer func() { _ = ml.Shutdown() }()
	n, err := ml.Join(seeds)
	a.Accepted = err == nil && n > 0
	a.Detail = fmt.Sprintf("joined %d of %d: %v", n, len(seeds), errText(err))
	t := time.NewTimer(c.Hold)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	if members := ml.NumMembers(); members > 1 {
		a.Accepted = true
		a.Detail += fmt.Sprintf("; saw %d members", members)
	}
	_ = ml.Leave(time.Second)
	return a
}

// metaDelegate announces fixed metadata.
type metaDelegate []byte

func (m metaDelegate) NodeMeta(int) []byte                  { return m }
func (metaDelegate) NotifyMsg([]byte)                       {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte        { return nil }
func (metaDelegate) LocalState(bool) []byte                 { return nil }
func (metaDelegate) MergeRemoteState(buf []byte, join bool) {}

// localAddr is the address this host reaches target from.
func localAddr(target string) (string, error) {
	c, err := net.Dial("udp", target)
	if err != nil {
		return "", err
	}
	defer c.Close()
	host, _, err := net.SplitHostPort(c.LocalAddr().String())
	return host, err
}
