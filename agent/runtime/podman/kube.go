package podman

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// KubeName is the workload `runtime` value the podman-kube runtime serves.
const KubeName = "podman-kube"

// Suffixes of the two volumes that hold what the runtime must know of an
// instance after an agent restart, named <instance><suffix> as Ankaios
// names them; the data sits base64-encoded in their label `data`.
const (
	kubeConfigSuffix = ".config"
	kubePodsSuffix   = ".pods"
	labelData        = "data"
)

// KubeRuntime runs workloads from Kubernetes manifests with `podman kube
// play`, as the Ankaios podman-kube runtime does. An instance's ID is its
// instance name; the pods it made and what `podman kube down` needs are
// kept in two labelled volumes, so a restarted agent finds them again.
// It shares the podman runtime's binary and its `podman ps --all`
// answers: however many podman and podman-kube workloads run, their
// state polls cost one podman call a second.
type KubeRuntime struct {
	p *Runtime

	mu    sync.Mutex
	known map[string]kubeRecord // guarded by mu: instance name → record
	// instances are the names with a config volume, once listed is set:
	// only this runtime makes and removes those volumes, so after the
	// first `podman volume ls` List answers from here, and a resync
	// round on a host without kube workloads costs no podman call.
	instances map[string]bool // guarded by mu
	listed    bool            // guarded by mu
}

// kubeRecord is what the runtime keeps of one instance: the pods `kube
// play` made, and what `kube down` needs.
type kubeRecord struct {
	pods []string
	down kubeStored
}

// kubeStored is the runtimeConfig kept in the config volume: the
// options of `kube down` and the manifest cut to what `kube down` reads
// (apiVersion, kind and metadata.name of every object), so that no
// secret of the rendered manifest or of playOptions is stored. Its keys
// are Ankaios', so an Ankaios agent can read it too.
type kubeStored struct {
	GeneralOptions []string `yaml:"generalOptions,omitempty"`
	DownOptions    []string `yaml:"downOptions,omitempty"`
	Manifest       string   `yaml:"manifest"`
}

var _ runtime.Runtime = (*KubeRuntime)(nil)

// NewKube returns the podman-kube runtime on top of the podman runtime p,
// whose binary, grace period, logger, clock and `podman ps` answers it
// shares.
func NewKube(p *Runtime) *KubeRuntime {
	return &KubeRuntime{p: p, known: map[string]kubeRecord{}, instances: map[string]bool{}}
}

// Name returns "podman-kube".
func (k *KubeRuntime) Name() string { return KubeName }

// Check parses a rendered runtimeConfig.
func (k *KubeRuntime) Check(runtimeConfig string) error {
	_, err := parseKubeConfig(runtimeConfig)
	return err
}

// Create removes what is left of the instance, stores its config volume,
// plays the manifest and stores the pods it made. Workload files are
// refused, as by Ankaios (ConfigMaps do their job); a control interface
// is mounted into the container controlInterfaceTarget names.
func (k *KubeRuntime) Create(ctx context.Context, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", fmt.Errorf("podman-kube: create %s: no workload", s.Instance)
	}
	cfg, err := parseKubeConfig(s.Workload.RuntimeConfig)
	if err != nil {
		return "", err
	}
	if len(s.Mounts) > 0 {
		return "", runtime.BadConfig("files", "not supported by the podman-kube runtime; use a ConfigMap in the manifest")
	}
	manifest := cfg.Manifest
	if s.ControlInterface != "" {
		if manifest, err = withControlInterface(cfg, s.ControlInterface); err != nil {
			return "", err
		}
	}
	stored, err := storedConfig(cfg)
	if err != nil {
		return "", err
	}
	inst := s.Instance.String()
	if err := k.removeInstance(ctx, inst); err != nil {
		return "", fmt.Errorf("removing what is left of %s: %w", s.Instance, err)
	}
	labels := []string{"name=" + inst, "agent=" + s.Instance.AgentName}
	if err := k.storeVolume(ctx, inst+kubeConfigSuffix, stored.String(), labels); err != nil {
		return "", err
	}
	k.mu.Lock()
	k.instances[inst] = true
	k.mu.Unlock()
	defer k.p.ps.invalidate()
	args := append(append(append([]string(nil), cfg.GeneralOptions...), "kube", "play", "--quiet"), cfg.PlayOptions...)
	args = append(args, "-")
	out, playErr := k.exec(ctx, runTimeout, manifest, args...)
	pods := parsePlayedPods(out)
	if playErr != nil {
		// kube play may have made some pods before it failed: those go,
		// by id, and so does the config volume. Not `kube down`: a pod
		// of the manifest's name may be another workload's, which is
		// often why the play failed.
		k.discard(context.WithoutCancel(ctx), inst, pods)
		return "", playErr
	}
	podsJSON, _ := json.Marshal(pods)
	if err := k.storeVolume(ctx, inst+kubePodsSuffix, string(podsJSON), labels); err != nil {
		// As Ankaios: the pods run; without the volume a restarted agent
		// sees the instance as ended and replaces it.
		k.p.log.Warn("podman-kube: cannot store the pods of an instance", "instance", inst, "err", err)
	}
	k.remember(inst, kubeRecord{pods: pods, down: stored})
	return runtime.ID(inst), nil
}

// State combines the states of the containers of the instance's pods
// (see kubeState) from the shared `podman ps --all` answer. An instance
// without a config volume is runtime.ErrNotFound.
func (k *KubeRuntime) State(ctx context.Context, id runtime.ID) (state.ExecutionState, error) {
	rec, err := k.record(ctx, string(id))
	switch {
	case err == nil:
	case errors.Is(err, runtime.ErrNotFound), ctx.Err() != nil:
		return state.ExecutionState{}, err
	default:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}, nil
	}
	begin := k.p.clk().Now()
	snap, err := k.p.ps.get(ctx, begin.Add(-stateMaxAge))
	if err != nil {
		if ctx.Err() != nil {
			return state.ExecutionState{}, err
		}
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}, nil
	}
	byPod := podsOf(snap, rec.pods)
	if len(byPod) < len(rec.pods) && snap.at.Before(begin) {
		// A pod is only gone in an answer taken since the question.
		if snap, err = k.p.ps.get(ctx, begin); err != nil {
			if ctx.Err() != nil {
				return state.ExecutionState{}, err
			}
			return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}, nil
		}
		byPod = podsOf(snap, rec.pods)
	}
	return kubeState(rec.pods, byPod), nil
}

// Delete takes the instance down: `podman kube down` with the stored
// manifest and downOptions, then its two volumes. An instance already
// gone is not an error.
func (k *KubeRuntime) Delete(ctx context.Context, id runtime.ID) error {
	if _, err := state.ParseInstanceName(string(id)); err != nil {
		return nil
	}
	return k.removeInstance(ctx, string(id))
}

// List returns the instances whose config volume names one of the agent's
// instances, as Ankaios finds them: the first List asks podman (one
// `podman volume ls`), later ones answer from what Create and Delete kept.
func (k *KubeRuntime) List(ctx context.Context, agent string) ([]runtime.Found, error) {
	k.mu.Lock()
	listed := k.listed
	k.mu.Unlock()
	if !listed {
		out, err := k.listVolumes(ctx)
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		for _, name := range strings.Fields(out) {
			if base, ok := strings.CutSuffix(name, kubeConfigSuffix); ok {
				k.instances[base] = true
			}
		}
		k.listed = true
		k.mu.Unlock()
	}
	var found []runtime.Found
	k.mu.Lock()
	for base := range k.instances {
		inst, err := state.ParseInstanceName(base)
		if err != nil || inst.AgentName != agent {
			continue
		}
		found = append(found, runtime.Found{Instance: inst, ID: runtime.ID(base)})
	}
	k.mu.Unlock()
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	return found, nil
}

// volumeListTries bounds listVolumes' retries.
const volumeListTries = 5

// listVolumes runs `podman volume ls`. Podman fails the whole listing when
// a volume it has just listed is removed before it reads it ("no such
// volume"), which another program removing its own volume can cause at any
// time; the list is asked again then, a bounded number of times.
func (k *KubeRuntime) listVolumes(ctx context.Context) (string, error) {
	var err error
	for try := 0; try < volumeListTries; try++ {
		var out string
		out, err = k.exec(ctx, callTimeout, "", "volume", "ls", "--format", "{{.Name}}")
		if err == nil || !noSuchVolume(err) || ctx.Err() != nil {
			return out, err
		}
	}
	return "", err
}

// Logs runs `podman logs` on the containers of the instance's pods, the
// infra containers left out.
func (k *KubeRuntime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	rec, err := k.record(ctx, string(id))
	if err != nil {
		return nil, err
	}
	snap, err := k.p.ps.get(ctx, k.p.clk().Now())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, cs := range podsOf(snap, rec.pods) {
		for _, c := range cs {
			if !c.IsInfra && validID(c.ID) {
				ids = append(ids, c.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("podman-kube %s: no container: %w", id, runtime.ErrNotFound)
	}
	sort.Strings(ids)
	args := logsArgs(runtime.ID(ids[0]), o)
	return k.p.startLogs(ctx, append(args, ids[1:]...))
}

// Pods returns the pod ids of an instance; tests use it.
func (k *KubeRuntime) Pods(ctx context.Context, id runtime.ID) ([]string, error) {
	rec, err := k.record(ctx, string(id))
	return rec.pods, err
}

// removeInstance takes down what is kept of the instance, if anything.
func (k *KubeRuntime) removeInstance(ctx context.Context, inst string) error {
	rec, err := k.record(ctx, inst)
	if errors.Is(err, runtime.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer k.p.ps.invalidate()
	args := append(append(append([]string(nil), rec.down.GeneralOptions...), "kube", "down"), rec.down.DownOptions...)
	args = append(args, "-")
	if _, err := k.exec(ctx, k.p.grace+stopSlack, rec.down.Manifest, args...); err != nil {
		// kube down stops at a pod that is gone (an operator's `podman
		// pod rm`); the instance's own pods go by their ids then.
		if ctx.Err() != nil || len(rec.pods) == 0 {
			return err
		}
		rm := append([]string{"pod", "rm", "--force", "--ignore", "-t", k.p.graceSeconds()}, rec.pods...)
		if _, rmErr := k.exec(ctx, k.p.grace+stopSlack, "", rm...); rmErr != nil {
			return err
		}
	}
	if _, err := k.exec(ctx, callTimeout, "", "volume", "rm", "--force", inst+kubePodsSuffix, inst+kubeConfigSuffix); err != nil {
		return err
	}
	k.forget(inst)
	return nil
}

// discard removes the pods a failed play made and the instance's volumes.
func (k *KubeRuntime) discard(ctx context.Context, inst string, pods []string) {
	if len(pods) > 0 {
		rm := append([]string{"pod", "rm", "--force", "--ignore", "-t", "0"}, pods...)
		if _, err := k.exec(ctx, k.p.grace+stopSlack, "", rm...); err != nil {
			k.p.log.Warn("podman-kube: cannot remove the pods of a failed play", "instance", inst, "err", err)
		}
	}
	if _, err := k.exec(ctx, callTimeout, "", "volume", "rm", "--force", inst+kubePodsSuffix, inst+kubeConfigSuffix); err != nil {
		k.p.log.Warn("podman-kube: cannot remove the volumes of a failed play", "instance", inst, "err", err)
	}
	k.forget(inst)
}

// forget drops an instance whose volumes were removed.
func (k *KubeRuntime) forget(inst string) {
	k.mu.Lock()
	delete(k.known, inst)
	delete(k.instances, inst)
	k.mu.Unlock()
}

func (k *KubeRuntime) remember(inst string, rec kubeRecord) {
	k.mu.Lock()
	k.known[inst] = rec
	k.mu.Unlock()
}

// record is what the runtime knows of an instance: remembered, or read
// from its volumes (after an agent restart). Without a config volume the
// instance is runtime.ErrNotFound; without a pods volume it made no pod
// the runtime knows of.
func (k *KubeRuntime) record(ctx context.Context, inst string) (kubeRecord, error) {
	k.mu.Lock()
	rec, ok := k.known[inst]
	k.mu.Unlock()
	if ok {
		return rec, nil
	}
	if _, err := state.ParseInstanceName(inst); err != nil {
		return kubeRecord{}, fmt.Errorf("podman-kube instance %q: %w", inst, runtime.ErrNotFound)
	}
	data, err := k.readVolume(ctx, inst+kubeConfigSuffix)
	if err != nil {
		return kubeRecord{}, err
	}
	if err := yaml.Unmarshal([]byte(data), &rec.down); err != nil {
		return kubeRecord{}, fmt.Errorf("podman-kube %s: the config volume does not hold a runtimeConfig: %w", inst, err)
	}
	if pods, err := k.readVolume(ctx, inst+kubePodsSuffix); err == nil {
		if err := json.Unmarshal([]byte(pods), &rec.pods); err != nil {
			k.p.log.Warn("podman-kube: the pods volume does not hold a list", "instance", inst, "err", err)
		}
	} else if ctx.Err() != nil {
		return kubeRecord{}, err
	}
	k.remember(inst, rec)
	return rec, nil
}

// storeVolume creates (again) a volume holding data in its label.
func (k *KubeRuntime) storeVolume(ctx context.Context, name, data string, labels []string) error {
	if _, err := k.exec(ctx, callTimeout, "", "volume", "rm", "--force", name); err != nil {
		return err
	}
	args := []string{"volume", "create", "--label", labelData + "=" + base64.RawStdEncoding.EncodeToString([]byte(data))}
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	_, err := k.exec(ctx, callTimeout, "", append(args, name)...)
	return err
}

// noSuchVolume: podman refused a call because a volume it was asked for,
// or had just listed, is gone.
func noSuchVolume(err error) bool { return strings.Contains(err.Error(), "no such volume") }

// readVolume returns the data label of a volume; runtime.ErrNotFound when
// there is no such volume.
func (k *KubeRuntime) readVolume(ctx context.Context, name string) (string, error) {
	out, err := k.exec(ctx, callTimeout, "", "volume", "inspect", name)
	if err != nil {
		if noSuchVolume(err) {
			return "", fmt.Errorf("volume %s: %w", name, runtime.ErrNotFound)
		}
		return "", err
	}
	var vs []struct {
		Labels map[string]string `json:"Labels"`
	}
	if err := json.Unmarshal([]byte(out), &vs); err != nil || len(vs) == 0 {
		return "", fmt.Errorf("podman volume inspect %s: cannot parse its output", name)
	}
	raw := strings.TrimRight(vs[0].Labels[labelData], "=")
	b, err := base64.RawStdEncoding.DecodeString(raw)
	if err != nil {
		return "", fmt.Errorf("volume %s: label %s is not base64: %w", name, labelData, err)
	}
	return string(b), nil
}

// exec runs podman with input on its standard input. Unlike the podman
// runtime's calls, the debug line names only the subcommand: manifests
// and options of podman-kube workloads may hold secrets, and so does the
// data of the config volume.
func (k *KubeRuntime) exec(ctx context.Context, timeout time.Duration, input string, args ...string) (string, error) {
	return k.p.run(ctx, timeout, input, kubeSubcommand(args), nil, args)
}

// kubeSubcommand names a call by its subcommand words only.
func kubeSubcommand(args []string) string {
	for i, a := range args {
		if (a == "kube" || a == "volume" || a == "pod") && i+1 < len(args) {
			return a + " " + args[i+1]
		}
	}
	return subcommand(args)
}

// parsePlayedPods reads the pod ids from what `podman kube play` prints:
// the lines under "Pod:", up to the next heading.
func parsePlayedPods(out string) []string {
	var pods []string
	inPods := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "Pod:":
			inPods = true
		case strings.HasSuffix(line, ":"):
			inPods = false
		case inPods && line != "" && validID(line):
			pods = append(pods, line)
		}
	}
	return pods
}

// storedConfig is the config volume's content for cfg.
func storedConfig(cfg kubeConfig) (kubeStored, error) {
	docs, err := manifestDocs(root+".manifest", cfg.Manifest)
	if err != nil {
		return kubeStored{}, err
	}
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		out, err := yaml.Marshal(downObject(d))
		if err != nil {
			return kubeStored{}, runtime.BadConfig(root+".manifest", "document %d: %v", i+1, err)
		}
		b.Write(out)
	}
	return kubeStored{GeneralOptions: cfg.GeneralOptions, DownOptions: cfg.DownOptions, Manifest: b.String()}, nil
}

// String is the YAML the config volume holds.
func (s kubeStored) String() string {
	out, _ := yaml.Marshal(s)
	return string(out)
}

// downObject keeps of a Kubernetes object what `podman kube down` reads.
func downObject(d *yaml.Node) map[string]any {
	obj := map[string]any{}
	if v := mapValue(d, "apiVersion"); v != nil && v.Kind == yaml.ScalarNode {
		obj["apiVersion"] = v.Value
	}
	if v := mapValue(d, "kind"); v != nil && v.Kind == yaml.ScalarNode {
		obj["kind"] = v.Value
	}
	if v := mapValue(mapValue(d, "metadata"), "name"); v != nil && v.Kind == yaml.ScalarNode {
		obj["metadata"] = map[string]string{"name": v.Value}
	}
	return obj
}
