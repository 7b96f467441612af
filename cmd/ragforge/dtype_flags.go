package main

import (
	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/nn"
)

// dtypeFlag is --dtype of the inference commands: the dtype the model's
// weights are held in, with HF from_pretrained's torch_dtype values
// (nn.DType). auto, the default, keeps what the checkpoint stores, so a
// BF16 checkpoint takes half the memory of float32; float32, bfloat16 and
// float16 cast every weight. The model computes in float32 either way.
// Training commands have no --dtype: they always hold float32 master
// weights. As a pflag.Value it refuses an unknown name while the flags
// are parsed.
type dtypeFlag nn.DType

// addDTypeFlag registers --dtype on cmd, defaulting d to auto.
func addDTypeFlag(cmd *cobra.Command, d *dtypeFlag) {
	*d = dtypeFlag(nn.Auto)
	cmd.Flags().Var(d, "dtype", "dtype the weights are held in, as HF's torch_dtype: auto (as stored: a BF16 checkpoint stays bfloat16, half the memory) | float32 | bfloat16 | float16 (not on the go backend); computation is float32 either way")
}

func (d *dtypeFlag) String() string { return string(*d) }
func (d *dtypeFlag) Type() string   { return "dtype" }

func (d *dtypeFlag) Set(s string) error {
	v, err := nn.ParseDType(s)
	if err != nil {
		return err
	}
	*d = dtypeFlag(v)
	return nil
}

// get is the parsed value; auto when the flag was never registered.
func (d dtypeFlag) get() nn.DType {
	if d == "" {
		return nn.Auto
	}
	return nn.DType(d)
}
