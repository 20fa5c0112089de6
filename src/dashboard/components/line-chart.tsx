import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Point {
  /** Unix seconds. */
  t: number;
  value: number;
}

/**
 * A time series in uPlot (canvas, fast enough to redraw every second). The peak, when given, is marked on the line.
 * The canvas is one image to assistive technology, named by `label`, which the caller keeps up to date.
 */
/** `span`: seconds of x axis ending at the last point (the live chart's fixed 5 minutes), else the points' extent. */
export function LineChart({
  points,
  peak,
  label,
  height = 240,
  stepped = false,
  span = 0,
}: {
  points: readonly Point[];
  peak?: Point | null;
  label: string;
  height?: number;
  stepped?: boolean;
  span?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const peakRef = useRef(peak);
  peakRef.current = peak;

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const css = getComputedStyle(el);
    const stroke = css.getPropertyValue('--accent').trim() || '#3b5bdb';
    const marker = css.getPropertyValue('--critical').trim() || '#c92a2a';
    const axis = {
      stroke: css.getPropertyValue('--muted').trim() || '#666',
      grid: { stroke: 'rgba(128,128,128,0.15)' },
      ticks: { show: false },
    };
    const drawPeak = (u: uPlot): void => {
      const p = peakRef.current;
      if (!p || p.value <= 0) return;
      const x = u.valToPos(p.t, 'x', true);
      const y = u.valToPos(p.value, 'y', true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
      const ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = marker;
      ctx.beginPath();
      ctx.arc(x, y, 5 * devicePixelRatio, 0, 2 * Math.PI);
      ctx.fill();
      ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
      ctx.textAlign = x > u.bbox.left + u.bbox.width * 0.8 ? 'right' : 'left';
      ctx.fillText(
        `peak ${p.value.toLocaleString('en-IN')}`,
        x + (ctx.textAlign === 'left' ? 8 : -8) * devicePixelRatio,
        Math.max(y - 8 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio),
      );
      ctx.restore();
    };
    const u = new uPlot(
      {
        width: el.clientWidth || 300,
        height,
        legend: { show: false },
        cursor: { y: false },
        scales: {
          x: {
            time: true,
            ...(span > 0
              ? { range: (_u: uPlot, _min: number, max: number): [number, number] => [max - span, max] }
              : {}),
          },
          y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.15)] },
        },
        axes: [
          axis,
          {
            ...axis,
            size: 56,
            values: (_u, ticks) =>
              ticks.map((v) => (v >= 100_000 ? `${(v / 100_000).toFixed(1)}L` : v.toLocaleString('en-IN'))),
          },
        ],
        series: [
          {},
          {
            stroke,
            width: 2,
            fill: `${stroke}22`,
            points: { show: false },
            ...(stepped ? { paths: uPlot.paths.stepped!({ align: 1 }) } : {}),
          },
        ],
        hooks: { draw: [drawPeak] },
      },
      [[], []],
      el,
    );
    chart.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: el.clientWidth, height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      chart.current = null;
    };
  }, [height, stepped, span]);

  useEffect(() => {
    chart.current?.setData([points.map((p) => p.t), points.map((p) => p.value)]);
  }, [points, peak]);

  return <div class="chart" ref={box} role="img" aria-label={label} />;
}
