package trainer

// The gradients training relies on (Rsqrt, which GoMLX v0.26 lacks, and
// DotGeneral as two matmuls) are registered by models/backend/hook; the
// import guarantees them for a Trainer on any backend.
import _ "github.com/ragforge/ragforge/models/backend/hook"
