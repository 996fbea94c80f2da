package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/store/sqlite"
)

// recorder is a Registerer that notes the names of the metrics it
// registers on reg.
type recorder struct {
	reg   *prometheus.Registry
	names []string
}

var fqName = regexp.MustCompile(`fqName: "([a-zA-Z_:]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if n := fqName.FindStringSubmatch(d.String()); n != nil {
			r.names = append(r.names, n[1])
		}
	}
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// TestDocumented: every metric New, CollectStore, CollectUpstreams and
// CollectJobAPIs register is in the
// table of docs/metrics.md and every metric of the table is registered;
// docs/alerts.yml is a rule file (YAML with groups of rules, each with an
// alert name and an expression) naming only those metrics.
func TestDocumented(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := &recorder{reg: prometheus.NewPedanticRegistry()}
	m := metrics.New(r)
	if err := m.CollectStore(st, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.CollectUpstreams(func() map[string]error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := m.CollectJobAPIs(func() map[string]error { return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(r.names)
	if len(r.names) != 24 {
		t.Fatalf("registered metrics: %v, want 24", r.names)
	}

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(mcptask_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if !slices.Equal(r.names, documented) {
		t.Errorf("registered metrics %v\ndocumented in docs/metrics.md %v", r.names, documented)
	}

	raw, err := os.ReadFile("../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("docs/alerts.yml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || strings.TrimSpace(rule.Expr) == "" {
				t.Errorf("docs/alerts.yml: a rule without alert or expr: %+v", rule)
			}
			alerts = append(alerts, rule.Alert)
			for _, name := range regexp.MustCompile(`mcptask_[a-z_]+`).FindAllString(rule.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !slices.Contains(r.names, base) {
					t.Errorf("docs/alerts.yml: %s names %s, which is no metric of package metrics", rule.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{"MCPTaskStuckInputRequired", "MCPTaskFailureRatio", "MCPTaskDeniedLookupSpike", "MCPTaskQueueBacklog"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("docs/alerts.yml has no alert %s", want)
		}
		if !strings.Contains(string(doc), "**"+want+"**") {
			t.Errorf("docs/metrics.md does not describe the alert %s", want)
		}
	}
}
