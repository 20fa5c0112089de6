// The world a simulated audience lives in: India's states weighted by population, the CDN pops that serve them,
// the device mix of an Indian OTT audience, and the shape of a cricket final's audience over the match.

export interface Place {
  region: string;
  /** Population in millions (Census 2011): the share of viewers from this state. */
  population: number;
  /** The CDN pops that serve it, the first most often. */
  pops: readonly string[];
}

export const places: readonly Place[] = [
  { region: 'Uttar Pradesh', population: 199.8, pops: ['lko1', 'del1'] },
  { region: 'Maharashtra', population: 112.4, pops: ['bom1', 'bom2', 'pnq1'] },
  { region: 'Bihar', population: 104.1, pops: ['pat1', 'ccu1'] },
  { region: 'West Bengal', population: 91.3, pops: ['ccu1'] },
  { region: 'Madhya Pradesh', population: 72.6, pops: ['nag1', 'bom1'] },
  { region: 'Tamil Nadu', population: 72.1, pops: ['maa1'] },
  { region: 'Rajasthan', population: 68.5, pops: ['jai1', 'del1'] },
  { region: 'Karnataka', population: 61.1, pops: ['blr1'] },
  { region: 'Gujarat', population: 60.4, pops: ['amd1', 'bom1'] },
  { region: 'Andhra Pradesh', population: 49.4, pops: ['hyd1', 'maa1'] },
  { region: 'Odisha', population: 42.0, pops: ['bbi1', 'ccu1'] },
  { region: 'Telangana', population: 35.0, pops: ['hyd1'] },
  { region: 'Kerala', population: 33.4, pops: ['cok1', 'maa1'] },
  { region: 'Jharkhand', population: 33.0, pops: ['ccu1', 'pat1'] },
  { region: 'Assam', population: 31.2, pops: ['gau1', 'ccu1'] },
  { region: 'Punjab', population: 27.7, pops: ['ixc1', 'del1'] },
  { region: 'Chhattisgarh', population: 25.5, pops: ['nag1'] },
  { region: 'Haryana', population: 25.4, pops: ['del1'] },
  { region: 'Delhi', population: 16.8, pops: ['del1', 'del2'] },
  { region: 'Jammu and Kashmir', population: 12.5, pops: ['ixc1'] },
  { region: 'Uttarakhand', population: 10.1, pops: ['del1'] },
  { region: 'Himachal Pradesh', population: 6.9, pops: ['ixc1'] },
  { region: 'Tripura', population: 3.7, pops: ['gau1'] },
  { region: 'Meghalaya', population: 3.0, pops: ['gau1'] },
  { region: 'Manipur', population: 2.9, pops: ['gau1'] },
  { region: 'Nagaland', population: 2.0, pops: ['gau1'] },
  { region: 'Goa', population: 1.5, pops: ['bom1'] },
  { region: 'Arunachal Pradesh', population: 1.4, pops: ['gau1'] },
  { region: 'Puducherry', population: 1.2, pops: ['maa1'] },
  { region: 'Chandigarh', population: 1.1, pops: ['ixc1'] },
  { region: 'Mizoram', population: 1.1, pops: ['gau1'] },
  { region: 'Sikkim', population: 0.6, pops: ['ccu1'] },
];

export interface Device {
  device_type: string;
  os: string;
  player: string;
  weight: number;
}

/** Mobile first, then the living-room TV, as Indian OTT audiences are. */
export const devices: readonly Device[] = [
  { device_type: 'mobile', os: 'Android', player: 'exoplayer', weight: 58 },
  { device_type: 'mobile', os: 'iOS', player: 'avplayer', weight: 8 },
  { device_type: 'tv', os: 'Android TV', player: 'exoplayer', weight: 14 },
  { device_type: 'tv', os: 'Tizen', player: 'shaka', weight: 4 },
  { device_type: 'desktop', os: 'Windows', player: 'hls.js', weight: 9 },
  { device_type: 'tablet', os: 'Android', player: 'exoplayer', weight: 5 },
  { device_type: 'console', os: 'PlayStation', player: 'shaka', weight: 2 },
];

/** Bitrate ladder (kbps) of the stream. */
export const ladder: readonly number[] = [400, 800, 1600, 3000, 4500, 6000];

export interface Content {
  content_id: string;
  content_title: string;
  content_type: string;
  /** Seconds; null for the live match. */
  duration: number | null;
  /** Share of sessions that pick it. */
  weight: number;
}

/** The live final, and the clips people watch around it. */
export const catalogue: readonly Content[] = [
  { content_id: 'final-live', content_title: 'The Final: live', content_type: 'sports', duration: null, weight: 85 },
  {
    content_id: 'semi-highlights',
    content_title: 'Semi-final highlights',
    content_type: 'clip',
    duration: 600,
    weight: 6,
  },
  {
    content_id: 'toss-interview',
    content_title: 'Captains at the toss',
    content_type: 'clip',
    duration: 180,
    weight: 4,
  },
  {
    content_id: 'road-to-final',
    content_title: 'Road to the final',
    content_type: 'episode',
    duration: 1500,
    weight: 5,
  },
];

/**
 * The audience of a cricket final, as a share of its peak, at `x` ∈ [0, 1] of the match: people arrive for the
 * toss, the first innings builds, the innings break dips, the chase builds again to a peak in the final overs, and
 * the audience leaves after the last ball.
 */
const curve: ReadonlyArray<readonly [number, number]> = [
  [0, 0.15],
  [0.08, 0.6],
  [0.42, 0.75],
  [0.45, 0.5],
  [0.49, 0.45],
  [0.53, 0.7],
  [0.8, 0.85],
  [0.92, 1],
  [0.95, 0.95],
  [1, 0.3],
];

export function matchAudience(x: number): number {
  const at = Math.min(1, Math.max(0, x));
  for (let i = 1; i < curve.length; i++) {
    const [x1, y1] = curve[i]!;
    const [x0, y0] = curve[i - 1]!;
    if (at <= x1) return y0 + ((y1 - y0) * (at - x0)) / (x1 - x0);
  }
  return curve[curve.length - 1]![1];
}
