package frameworks

import (
	"github.com/opendlc/opendlc/schemas"
)

// Megatron runs Megatron-LM programs, which are started by torchrun and initialise
// torch.distributed from its environment: the same environment as PyTorch.
type Megatron struct{ torchRendezvous }

// Name returns "megatron".
func (Megatron) Name() schemas.Framework { return schemas.FrameworkMegatron }
