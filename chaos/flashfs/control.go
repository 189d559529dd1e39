package flashfs

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Usage is the control language, one command a line:
const Usage = `powercut [tear|tear=N] [NAME...]   cut the power of the named mounts (all by default)
full NAME|all                      writes fail with ENOSPC
readonly NAME|all                  changes fail with EROFS
eio NAME|all read|fsync|both GLOB  reads or fsyncs of matching files fail with EIO
flip NAME FILE bits=B[,B...]       flip these bits (byte*8+bit) of the durable file
flip NAME FILE random=N            flip N random bits of the durable file
heal [NAME|all]                    clear the faults
status                             one line per mount`

// Exec runs one command of the control language and returns its answer.
func (g *Group) Exec(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", errors.New("empty command; " + firstLine(Usage))
	}
	cmd, args := f[0], f[1:]
	switch cmd {
	case "powercut":
		var o PowerCutOptions
		for _, a := range args {
			switch {
			case a == "tear":
				o.Tear, o.TearKeep = true, -1
			case strings.HasPrefix(a, "tear="):
				n, err := strconv.Atoi(strings.TrimPrefix(a, "tear="))
				if err != nil || n < 0 {
					return "", fmt.Errorf("powercut %s: want tear=N with N bytes kept, N >= 0", a)
				}
				o.Tear, o.TearKeep = true, n
			default:
				if g.Get(a) == nil {
					return "", fmt.Errorf("powercut: no mount named %q", a)
				}
				o.Mounts = append(o.Mounts, a)
			}
		}
		rep, err := g.PowerCut(o)
		return rep.String(), err
	case "full", "readonly":
		if len(args) != 1 {
			return "", fmt.Errorf("%s: want one mount name (or all)", cmd)
		}
		ms, err := g.targets(args[0])
		if err != nil {
			return "", fmt.Errorf("%s: %w", cmd, err)
		}
		for _, m := range ms {
			if cmd == "full" {
				m.SetFull(true)
			} else {
				m.SetReadOnly(true)
			}
		}
		return fmt.Sprintf("%s on %s", cmd, names(ms)), nil
	case "eio":
		if len(args) != 3 {
			return "", errors.New("eio: want NAME|all read|fsync|both GLOB")
		}
		ms, err := g.targets(args[0])
		if err != nil {
			return "", fmt.Errorf("eio: %w", err)
		}
		r := EIORule{Glob: args[2]}
		switch args[1] {
		case "read":
			r.Read = true
		case "fsync":
			r.Fsync = true
		case "both":
			r.Read, r.Fsync = true, true
		default:
			return "", fmt.Errorf("eio: %q: want read, fsync or both", args[1])
		}
		for _, m := range ms {
			if err := m.AddEIO(r); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("eio on %s of %s on %s", args[1], r.Glob, names(ms)), nil
	case "flip":
		if len(args) != 3 {
			return "", errors.New("flip: want NAME FILE bits=B[,B...] or NAME FILE random=N")
		}
		m := g.Get(args[0])
		if m == nil {
			return "", fmt.Errorf("flip: no mount named %q", args[0])
		}
		var bits []int64
		switch {
		case strings.HasPrefix(args[2], "bits="):
			for _, b := range strings.Split(strings.TrimPrefix(args[2], "bits="), ",") {
				n, err := strconv.ParseInt(b, 10, 64)
				if err != nil || n < 0 {
					return "", fmt.Errorf("flip: bit %q: want a bit offset >= 0", b)
				}
				bits = append(bits, n)
			}
			if err := m.Flip(args[1], bits); err != nil {
				return "", err
			}
		case strings.HasPrefix(args[2], "random="):
			n, err := strconv.Atoi(strings.TrimPrefix(args[2], "random="))
			if err != nil || n <= 0 {
				return "", fmt.Errorf("flip: %s: want random=N with N > 0", args[2])
			}
			if bits, err = m.FlipRandom(args[1], n); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("flip: %q: want bits=B[,B...] or random=N", args[2])
		}
		s := make([]string, len(bits))
		for i, b := range bits {
			s[i] = strconv.FormatInt(b, 10)
		}
		return fmt.Sprintf("flipped bits %s of %s on %s", strings.Join(s, ","), args[1], m.name), nil
	case "heal":
		target := "all"
		if len(args) > 1 {
			return "", errors.New("heal: want at most one mount name")
		}
		if len(args) == 1 {
			target = args[0]
		}
		ms, err := g.targets(target)
		if err != nil {
			return "", fmt.Errorf("heal: %w", err)
		}
		for _, m := range ms {
			m.Heal()
		}
		return "healed " + names(ms), nil
	case "status":
		var lines []string
		for _, m := range g.Mounts() {
			lines = append(lines, m.Status().String())
		}
		return strings.Join(lines, "\n"), nil
	}
	return "", fmt.Errorf("unknown command %q; the commands:\n%s", cmd, Usage)
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func (g *Group) targets(name string) ([]*Mount, error) {
	if name == "all" {
		ms := g.Mounts()
		if len(ms) == 0 {
			return nil, errors.New("no mount")
		}
		return ms, nil
	}
	if m := g.Get(name); m != nil {
		return []*Mount{m}, nil
	}
	return nil, fmt.Errorf("no mount named %q", name)
}

func names(ms []*Mount) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.name
	}
	return strings.Join(s, ",")
}

// Serve answers the control language on l until l is closed. Each
// connection sends command lines; each gets one answer, "ok TEXT" or
// "error TEXT", whose text has its newlines escaped as " | ".
func (g *Group) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go g.serveConn(c)
	}
}

func (g *Group) serveConn(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		out, err := g.Exec(sc.Text())
		line := "ok " + out
		if err != nil {
			line = "error " + err.Error()
		}
		if _, err := fmt.Fprintln(c, strings.ReplaceAll(line, "\n", " | ")); err != nil {
			return
		}
	}
}

// Command sends one command to the control socket at addr and returns
// the answer's text; an "error" answer is an error.
func Command(socket, line string) (string, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return "", fmt.Errorf("flashfs control %s: %w", socket, err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("flashfs control %s: no answer: %w", socket, err)
	}
	answer = strings.TrimSuffix(answer, "\n")
	if rest, ok := strings.CutPrefix(answer, "ok "); ok || answer == "ok" {
		return rest, nil
	}
	return "", errors.New(strings.TrimPrefix(answer, "error "))
}
