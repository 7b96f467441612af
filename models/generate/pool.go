package generate

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// Pool is a Generator over several OpenAI-compatible servers: the prompts
// of a Generate call are taken one at a time by Workers workers per
// server, each worker sending its prompt to its own server, so a fast
// server takes more of them. Each server's client keeps its retries,
// backoff and concurrency limit. A server that keeps failing fails only
// the prompts it took (their errors say which server). Outputs come back in
// prompt order and, since lm.OpenAI seeds each request from the prompt
// (lm.ItemSeed), equal one server's given deterministic servers.
type Pool struct {
	Gens    []lm.Generator
	Workers int // workers per server; the openai client's default concurrency (4) when 0
}

// Name lists the servers: "pool(openai:…, openai:…)".
func (p *Pool) Name() string {
	names := make([]string, len(p.Gens))
	for i, g := range p.Gens {
		names[i] = g.Name()
	}
	return "pool(" + strings.Join(names, ", ") + ")"
}

// Generate implements lm.Generator.
func (p *Pool) Generate(ctx context.Context, prompts []string, opt lm.Options) ([][]string, []error) {
	outs := make([][]string, len(prompts))
	errs := make([]error, len(prompts))
	per := p.Workers
	if per <= 0 {
		per = openai.DefaultOptions().Concurrency
	}
	var mu sync.Mutex
	next := 0
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(prompts) {
			return -1
		}
		next++
		return next - 1
	}
	var wg sync.WaitGroup
	for _, g := range p.Gens {
		for range per {
			wg.Go(func() {
				for i := take(); i >= 0; i = take() {
					o, e := g.Generate(ctx, prompts[i:i+1], opt)
					outs[i], errs[i] = o[0], e[0]
					if errs[i] != nil {
						errs[i] = fmt.Errorf("%s: %w", g.Name(), errs[i])
					}
				}
			})
		}
	}
	wg.Wait()
	return outs, errs
}

// ParseGeneratorSpecs parses a generator spec or a comma-separated list of
// openai:<url>[#model] specs, one per server ("openai:http://a:8000/v1,
// openai:http://b:8000/v1"). Errors: a spec ParseGeneratorSpec refuses, a
// list holding another kind (local models do not split over servers).
func ParseGeneratorSpecs(list string) ([]Spec, error) {
	parts := strings.Split(list, ",")
	out := make([]Spec, len(parts))
	for i, s := range parts {
		sp, err := ParseGeneratorSpec(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		if len(parts) > 1 && sp.Kind != "openai" {
			return nil, fmt.Errorf("generator %q: a list of generators is one openai:<url> per server, not %s", list, sp.Kind)
		}
		out[i] = sp
	}
	return out, nil
}

// OpenList opens the generators of ParseGeneratorSpecs(list): the one
// generator (Open), or a Pool over the servers with workers per server.
func OpenList(list, backendName string, opt openai.Options, workers int) (lm.Generator, error) {
	specs, err := ParseGeneratorSpecs(list)
	if err != nil {
		return nil, err
	}
	if len(specs) == 1 {
		return Open(specs[0], backendName, opt)
	}
	p := &Pool{Workers: workers}
	for _, sp := range specs {
		g, err := Open(sp, backendName, opt)
		if err != nil {
			return nil, err
		}
		p.Gens = append(p.Gens, g)
	}
	return p, nil
}
