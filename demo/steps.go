package demo

import (
	"context"
	"fmt"
)

// steps are the demo's stages, the steps run in order. Each stage calls
// the library function of a stand-alone command, so the summary's commands
// reproduce the figures, whether its step ran it alone or beside another
// lane.
func steps(o Options) []step {
	one := func(name string, run func(context.Context, *state) (Stage, error)) step {
		return step{{{name, run}}}
	}
	return []step{
		one("retrieval: BM25", evalBM25),
		one("tokenizers", trainTokenizers),
		one("models init", initModels),
		one("retrieval: hybrid (base)", evalHybrid),
		one("labels: evidence", labelEvidence),
		one("labels: ICT (corpus only)", labelICT),
		// The filter and the retriever depend only on the steps above and
		// not on each other: two lanes, side by side.
		{
			filterLane(o),
			{{"selflearn: 1 round (ICT)", selflearnRound}, {"retrieval: hybrid (tuned)", evalTuned}},
		},
		one("export", export),
		one("serve + /v1/pipeline", serveOnce),
	}
}

// filterLane trains the filter, then one more member per
// FilterEnsembleSeeds seed, and evaluates them together.
func filterLane(o Options) []stage {
	lane := []stage{{"filter: train", trainFilter}}
	for _, seed := range o.FilterEnsembleSeeds {
		lane = append(lane, stage{fmt.Sprintf("filter: train member (seed %d)", seed), func(ctx context.Context, st *state) (Stage, error) {
			return trainFilterMember(ctx, st, seed)
		}})
	}
	if o.FilterCalibrate {
		lane = append(lane, stage{"filter: calibrate", calibrateFilter})
	}
	return append(lane, stage{"filter: eval", evalFilter})
}
