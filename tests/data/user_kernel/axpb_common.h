// Included by axpb.cu: uploaded with it, found by NVRTC by name.
#pragma once
__device__ __forceinline__ float axpb_value(float alpha, float x, float b) { return alpha * x + b; }
