package frameworks

import (
	"github.com/opendlc/opendlc/schemas"
)

// Inference runs N independent shards of a batch-inference program, like Preprocess.
type Inference struct{ shards }

// Name returns "inference".
func (Inference) Name() schemas.Framework { return schemas.FrameworkInference }
