package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Timeline geometry, in SVG user units.
const (
	svgWidth   = 1200
	plotLeft   = 150
	plotRight  = svgWidth - 20
	laneHeight = 24
	ackHeight  = 80
	laneGap    = 14
)

// palette colours replicas in the order of their ids.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// WriteSVG writes the timeline: x is time; the lanes are the leader
// (a colour per replica, labelled with the term), the acknowledged writes
// per second, the faults (spans with their kind), and one lane per agent
// showing when it was attached to the leader.
func (r *Report) WriteSVG(path string) error {
	return os.WriteFile(path, r.SVG(), 0o644)
}

// svg accumulates the drawing.
type svg struct {
	b          bytes.Buffer
	start, end time.Time
	y          float64
}

func (s *svg) x(t time.Time) float64 {
	span := s.end.Sub(s.start)
	if span <= 0 {
		return plotLeft
	}
	f := float64(t.Sub(s.start)) / float64(span)
	return plotLeft + max(0, min(1, f))*(plotRight-plotLeft)
}

func (s *svg) printf(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// text writes escaped text at (x, y).
func (s *svg) text(x, y float64, class, t string) {
	s.printf(`<text x="%.1f" y="%.1f" class="%s">`, x, y, class)
	_ = xml.EscapeText(&s.b, []byte(t))
	s.printf("</text>\n")
}

// lane opens a labelled lane of height h and returns its top.
func (s *svg) lane(id, label string, h float64) float64 {
	top := s.y
	s.printf(`<g id="%s">`+"\n", attr(id))
	s.text(10, top+h/2+4, "label", label)
	s.printf(`<rect x="%d" y="%.1f" width="%d" height="%.1f" class="bg"/>`+"\n", plotLeft, top, plotRight-plotLeft, h)
	s.y += h + laneGap
	return top
}

func (s *svg) endLane() { s.printf("</g>\n") }

// SVG is the timeline WriteSVG writes.
func (r *Report) SVG() []byte {
	s := &svg{start: r.Start, end: r.End, y: 30}
	if !s.end.After(s.start) && len(r.Samples) > 0 {
		s.start, s.end = r.Samples[0].At, r.Samples[len(r.Samples)-1].At
	}
	body := s
	r.leaderLane(body)
	r.ackLane(body)
	r.faultLane(body)
	for _, a := range r.agents() {
		r.agentLane(body, a)
	}
	axisTop := body.y
	body.axis(axisTop)
	height := axisTop + 40

	var out bytes.Buffer
	fmt.Fprintf(&out, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f">`+"\n", svgWidth, height, svgWidth, height)
	out.WriteString(`<style>.label{font:12px sans-serif;fill:#333}.small{font:10px sans-serif;fill:#333}.bg{fill:#f6f6f6}.fault{fill:#d62728;fill-opacity:0.35;stroke:#d62728}.attached{fill:#2ca02c}.acks{fill:none;stroke:#1f77b4;stroke-width:1.5}.tick{stroke:#999}</style>` + "\n")
	title := fmt.Sprintf("Chaos run, seed %d, %d faults, availability %.1f%%", r.Seed, len(r.Faults), 100*r.Availability)
	out.WriteString(`<text x="10" y="18" class="label">`)
	_ = xml.EscapeText(&out, []byte(title))
	out.WriteString("</text>\n")
	out.Write(body.b.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

// leaderLane draws who led when, one colour per replica, and the term at
// every change.
func (r *Report) leaderLane(s *svg) {
	top := s.lane("lane-leader", "leader / term", laneHeight)
	colour := r.replicaColours()
	for i, smp := range r.Samples {
		if smp.Leader == "" {
			continue
		}
		until := s.end
		if i+1 < len(r.Samples) {
			until = r.Samples[i+1].At
		}
		x0, x1 := s.x(smp.At), s.x(until)
		s.printf(`<rect x="%.1f" y="%.1f" width="%.2f" height="%d" fill="%s"><title>`, x0, top, max(x1-x0, 0.5), laneHeight, colour[smp.Leader])
		_ = xml.EscapeText(&s.b, []byte(fmt.Sprintf("%s term %d", smp.Leader, smp.Term)))
		s.printf("</title></rect>\n")
		if i == 0 || r.Samples[i-1].Term != smp.Term || r.Samples[i-1].Leader != smp.Leader {
			s.text(x0+2, top-2, "small", fmt.Sprintf("%s t%d", smp.Leader, smp.Term))
		}
	}
	// Legend, right of the title.
	lx := float64(plotRight - 90*len(colour))
	for _, id := range slices.Sorted(mapKeys(colour)) {
		s.printf(`<rect x="%.1f" y="8" width="10" height="10" fill="%s"/>`+"\n", lx, colour[id])
		s.text(lx+14, 17, "small", id)
		lx += 90
	}
	s.endLane()
}

func (r *Report) replicaColours() map[string]string {
	var ids []string
	for _, smp := range r.Samples {
		if smp.Leader != "" && !slices.Contains(ids, smp.Leader) {
			ids = append(ids, smp.Leader)
		}
	}
	slices.Sort(ids)
	out := map[string]string{}
	for i, id := range ids {
		out[id] = palette[i%len(palette)]
	}
	return out
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ackLane draws acknowledged writes per second as a line.
func (r *Report) ackLane(s *svg) {
	top := s.lane("lane-acks", "acked writes/s", ackHeight)
	span := s.end.Sub(s.start)
	n := int((span + time.Second - 1) / time.Second)
	if n > 0 {
		perSec := make([]int, n)
		for _, smp := range r.Samples {
			if i := int(smp.At.Sub(s.start) / time.Second); i >= 0 && i < n {
				perSec[i] += smp.Acks
			}
		}
		peak := max(1, slices.Max(perSec))
		var pts []string
		for i, v := range perSec {
			x := s.x(s.start.Add(time.Duration(i)*time.Second + time.Second/2))
			y := top + ackHeight - float64(v)/float64(peak)*(ackHeight-4)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		s.printf(`<polyline class="acks" points="%s"/>`+"\n", strings.Join(pts, " "))
		s.text(plotLeft+4, top+12, "small", fmt.Sprintf("peak %d/s", peak))
	}
	s.endLane()
}

// faultLane draws every fault as a span from its start to its heal, in
// as many rows as overlapping faults need.
func (r *Report) faultLane(s *svg) {
	var rowEnd []float64 // right edge of the last span of each row
	rows := make([]int, len(r.Faults))
	for i, f := range r.Faults {
		x0 := s.x(f.At)
		x1 := x0 + 3
		if !f.Healed.IsZero() {
			x1 = max(x1, s.x(f.Healed))
		}
		x1 = max(x1, x0+6*float64(len(f.Kind))) // room for the label
		row := slices.IndexFunc(rowEnd, func(e float64) bool { return e < x0 })
		if row < 0 {
			row = len(rowEnd)
			rowEnd = append(rowEnd, 0)
		}
		rowEnd[row] = x1
		rows[i] = row
	}
	h := float64(laneHeight * max(1, len(rowEnd)))
	top := s.lane("lane-faults", "faults", h)
	for i, f := range r.Faults {
		y := top + float64(rows[i]*laneHeight)
		x0 := s.x(f.At)
		w := 3.0
		if !f.Healed.IsZero() {
			w = max(w, s.x(f.Healed)-x0)
		}
		s.printf(`<rect class="fault" x="%.1f" y="%.1f" width="%.1f" height="%d"><title>`, x0, y+2, w, laneHeight-4)
		_ = xml.EscapeText(&s.b, []byte(fmt.Sprintf("%s %s %s", f.Kind, f.Target, f.Detail)))
		s.printf("</title></rect>\n")
		s.text(x0+4, y+laneHeight-8, "small", f.Kind)
	}
	s.endLane()
}

// agentLane draws when agent was attached to the leader.
func (r *Report) agentLane(s *svg, agent string) {
	top := s.lane("lane-agent-"+agent, "agent "+agent, laneHeight/2)
	for i, smp := range r.Samples {
		if !slices.Contains(smp.Attached, agent) {
			continue
		}
		until := s.end
		if i+1 < len(r.Samples) {
			until = r.Samples[i+1].At
		}
		x0, x1 := s.x(smp.At), s.x(until)
		s.printf(`<rect class="attached" x="%.1f" y="%.1f" width="%.2f" height="%d"/>`+"\n", x0, top, max(x1-x0, 0.5), laneHeight/2)
	}
	s.endLane()
}

// axis draws time ticks, in seconds from the start, at a step that gives
// at most a dozen.
func (s *svg) axis(top float64) {
	span := s.end.Sub(s.start)
	step := time.Second
	for _, c := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		step = c
		if span/c <= 12 {
			break
		}
	}
	s.printf(`<g id="axis">` + "\n")
	for t := time.Duration(0); t <= span; t += step {
		x := s.x(s.start.Add(t))
		s.printf(`<line class="tick" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x, top, x, top+6)
		s.text(x-8, top+18, "small", fmt.Sprintf("%gs", t.Seconds()))
	}
	s.printf("</g>\n")
}

// attr escapes s for an attribute value.
func attr(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
