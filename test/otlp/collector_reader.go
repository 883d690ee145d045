// test/otlp/collector_reader.go: the OpenTelemetry Collector's own reader of
// OTLP profiles (go.opentelemetry.io/collector/pdata/pprofile, Debian sid's
// golang-opentelemetry-collector-dev) unmarshals an .otlp file with
// pprofileotlp.ExportRequest.UnmarshalProto and prints its samples as
// folded lines "comm;root;...;leaf COUNT" by DESIGN.md's frame text rules
// (COUNT: timestamps, or the sum of values / DIV when DIV is given), for the
// test to compare with stacksnap's folded output. Built in a sid root in
// GOPATH mode against the packaged sources.
//
//	collector_reader FILE.otlp [DIV]
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "collector_reader: "+f+"\n", a...)
	os.Exit(1)
}

func folded(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\\", "\\\\"), ";", "\\x3b")
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: collector_reader FILE.otlp [DIV]")
	}
	div := int64(0)
	if len(os.Args) > 2 {
		div, _ = strconv.ParseInt(os.Args[2], 10, 64)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		fail("UnmarshalProto: %v", err)
	}
	p := req.Profiles()
	d := p.Dictionary()
	strs := d.StringTable()
	str := func(i int32) string {
		if i < 0 || int(i) >= strs.Len() {
			fail("string index %d outside the table (%d)", i, strs.Len())
		}
		return strs.At(int(i))
	}
	attr := func(idx pcommonInt32s, key string) (string, bool) {
		for k := 0; k < idx.Len(); k++ {
			i := idx.At(k)
			if i <= 0 || int(i) >= d.AttributeTable().Len() {
				fail("attribute index %d outside the table", i)
			}
			a := d.AttributeTable().At(int(i))
			if str(a.KeyStrindex()) == key {
				return a.Value().AsString(), true
			}
		}
		return "", false
	}
	frame := func(li int32) string {
		if li <= 0 || int(li) >= d.LocationTable().Len() {
			fail("location index %d outside the table", li)
		}
		l := d.LocationTable().At(int(li))
		typ, ok := attr(l.AttributeIndices(), "profile.frame.type")
		if !ok {
			fail("location %d has no profile.frame.type", li)
		}
		if l.Lines().Len() == 0 {
			mi := l.MappingIndex()
			if mi > 0 {
				m := d.MappingTable().At(int(mi))
				return fmt.Sprintf("%s+0x%x", filepath.Base(str(m.FilenameStrindex())),
					l.Address()-m.MemoryStart()+m.FileOffset())
			}
			return fmt.Sprintf("[unknown]+0x%x", l.Address())
		}
		ln := l.Lines().At(0)
		fn := d.FunctionTable().At(int(ln.FunctionIndex()))
		name, file := str(fn.NameStrindex()), str(fn.FilenameStrindex())
		switch {
		case typ == "luajit" && file != "":
			return fmt.Sprintf("%s (%s:%d)", name, file, ln.Line())
		case typ == "kernel":
			return name + "_[k]"
		}
		return name
	}
	counts := map[string]int64{}
	rps := p.ResourceProfiles()
	for r := 0; r < rps.Len(); r++ {
		sps := rps.At(r).ScopeProfiles()
		for s := 0; s < sps.Len(); s++ {
			profs := sps.At(s).Profiles()
			for k := 0; k < profs.Len(); k++ {
				smps := profs.At(k).Samples()
				for j := 0; j < smps.Len(); j++ {
					smp := smps.At(j)
					comm, _ := attr(smp.AttributeIndices(), "thread.name")
					st := d.StackTable().At(int(smp.StackIndex()))
					var parts []string
					parts = append(parts, folded(comm))
					locs := st.LocationIndices()
					for x := locs.Len() - 1; x >= 0; x-- {
						parts = append(parts, folded(frame(locs.At(x))))
					}
					var n, sum int64
					n = int64(smp.TimestampsUnixNano().Len())
					for v := 0; v < smp.Values().Len(); v++ {
						sum += smp.Values().At(v)
					}
					if div > 0 {
						n = sum / div
					} else if n == 0 {
						n = sum
					}
					counts[strings.Join(parts, ";")] += n
				}
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s %d\n", k, counts[k])
	}
}

type pcommonInt32s = interface {
	Len() int
	At(int) int32
}

var _ = pprofile.NewProfiles
