# plot.gp: lfgc's benchmark plots.  Called by bench/report.py:
#   gnuplot -e "ratios='R.dat'; scaling='S.dat'; outdir='docs/bench'" plot.gp
# R.dat: case  time_ratio  rss_ratio  max_pause_ratio   (lfgc / peer)
# S.dat: live_mb  lfgc_ms_per_mb  bdwgc_ms_per_mb  lfgc_mark_ms  bdwgc_mark_ms
#        lfgc_max_pause_ms  bdwgc_max_pause_ms
# Missing values are NaN.

set terminal pngcairo size 900,480 font ",10" noenhanced
set datafile missing "NaN"
set grid ytics
set key top left

if (exists("ratios") && strlen(ratios) > 0) {
    set output outdir . "/ratios.png"
    set title "lfgc / bdwgc, medians (below 1: lfgc better; time = each workload's key metric)"
    set style data histograms
    set style histogram clustered gap 1
    set style fill solid 0.8 border -1
    set boxwidth 0.9
    set xtics rotate by -30 scale 0
    set ylabel "ratio lfgc / bdwgc (log scale)"
    set logscale y 2
    set yrange [*:*]
    set ytics ("1/64" 0.015625, "1/32" 0.03125, "1/16" 0.0625, "1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32)
    set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 lc rgb "black" front
    plot ratios using 2:xtic(1) title "time (key metric)" lc rgb "#4472c4", \
         '' using 3 title "peak RSS" lc rgb "#ed7d31", \
         '' using 4 title "longest pause" lc rgb "#70ad47"
    unset arrow 1
    unset logscale y
    set ytics autofreq
    set style data linespoints
    set xtics norotate
    set autoscale y
}

if (exists("scaling") && strlen(scaling) > 0) {
    set output outdir . "/scaling.png"
    set multiplot layout 1,2 title "Marking against live heap size (randomly linked 64-byte nodes)"
    set logscale x 2
    set xlabel "live heap (MiB)"
    set title "marking cost per MiB of live data"
    set ylabel "ms per MiB (median world-stopped pause / live MiB)"
    set yrange [0:*]
    plot scaling using 1:2 with linespoints lw 2 pt 7 lc rgb "#4472c4" title "lfgc", \
         '' using 1:3 with linespoints lw 2 pt 5 lc rgb "#a5a5a5" title "bdwgc"
    set title "longest world-stopped pause"
    set ylabel "ms"
    set logscale y 10
    set yrange [*:*]
    plot scaling using 1:6 with linespoints lw 2 pt 7 lc rgb "#4472c4" title "lfgc", \
         '' using 1:7 with linespoints lw 2 pt 5 lc rgb "#a5a5a5" title "bdwgc"
    unset multiplot
}

# malloc mode.  M.dat: case, then time / glibc for lfgc glibc mimalloc
# jemalloc tcmalloc (columns 2-6), then peak RSS / glibc for the same
# (columns 7-11).
if (exists("malloc") && strlen(malloc) > 0) {
    unset logscale
    unset xlabel
    set terminal pngcairo size 1000,820 font ",10" noenhanced
    set output outdir . "/malloc.png"
    set multiplot layout 2,1 title "malloc mode: each allocator relative to glibc's malloc (medians; below 1: better than glibc)"
    set style data histograms
    set style histogram clustered gap 1
    set style fill solid 0.8 border -1
    set boxwidth 0.9
    set xtics norotate scale 0
    set logscale y 2
    set yrange [*:*]
    set ytics ("1/16" 0.0625, "1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16)
    set arrow 2 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 lc rgb "black" front
    set key top left horizontal reverse Left
    set title "wall time / glibc's"
    set ylabel "ratio (log scale)"
    plot malloc using 2:xtic(1) title "lfgc" lc rgb "#4472c4", \
         '' using 3 title "glibc" lc rgb "#a5a5a5", \
         '' using 4 title "mimalloc" lc rgb "#ed7d31", \
         '' using 5 title "jemalloc" lc rgb "#70ad47", \
         '' using 6 title "tcmalloc" lc rgb "#ffc000"
    set title "peak RSS / glibc's"
    set yrange [0.25:*]
    plot malloc using 7:xtic(1) title "lfgc" lc rgb "#4472c4", \
         '' using 8 title "glibc" lc rgb "#a5a5a5", \
         '' using 9 title "mimalloc" lc rgb "#ed7d31", \
         '' using 10 title "jemalloc" lc rgb "#70ad47", \
         '' using 11 title "tcmalloc" lc rgb "#ffc000"
    unset multiplot
    unset arrow 2
    unset logscale y
}
