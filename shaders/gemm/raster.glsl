// Grouped rasterization: consecutive workgroups walk group_m tile rows down one tile column before moving
// to the next column, so the A rows and B columns that neighbouring workgroups read are still in L2.
// Returns (tile row, tile column) of workgroup ``linear`` in a tiles_m x tiles_n grid of output tiles.
#ifndef VKCOOP_RASTER_GLSL
#define VKCOOP_RASTER_GLSL
uvec2 grouped_tile(uint linear, uint tiles_m, uint tiles_n, uint group_m) {
    uint per_group = group_m * tiles_n;
    uint first_row = (linear / per_group) * group_m;
    uint rows_here = min(tiles_m - first_row, group_m);
    uint in_group = linear % per_group;
    return uvec2(first_row + in_group % rows_here, in_group / rows_here);
}
#endif
